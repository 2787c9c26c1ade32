//! The source drivers of this version: one line each. A driver is a folder beside this file
//! whose `DRIVER` declares its names, its options, a valid use and its build
//! ([`SourceDriver`]); [`build`] finds a statement's driver here, holds the node against the
//! driver's table (the options every source has, [`SourceOptions::DECLARED`], then its own),
//! builds it and refuses an option it declared and did not read. A driver syslog-ng has and
//! sluice does not is in [`NOT_YET`].

use super::driver::{Built, Common, SourceContext, SourceDriver};
use crate::options::{SourceOptions, MULTI_LINE};
use sluice_config::declared::{self, Declared, Options};
use sluice_config::{ConfigError, Node};

/// Every source driver, in the order "did you mean" and the reference list them.
pub static DRIVERS: &[&SourceDriver] = &[
    &super::network::DRIVER,
    &super::unix::DRIVER,
    &super::udp_balancer::DRIVER,
    &super::system::DRIVER,
    #[cfg(feature = "journal")]
    &super::systemd_journal::DRIVER,
    #[cfg(feature = "kafka")]
    &super::kafka::DRIVER,
    #[cfg(feature = "sql")]
    &super::sql::DRIVER,
    &super::file::DRIVER,
    &super::wildcard_file::DRIVER,
    &super::program::DRIVER,
    &super::pipe::DRIVER,
    &super::stdin::DRIVER,
    &super::internal::DRIVER,
];

/// Source drivers of syslog-ng that sluice does not have yet.
pub const NOT_YET: &[&str] = &[
    #[cfg(not(feature = "journal"))]
    "systemd_journal",
    "systemd_syslog",
    "python",
    "python_fetcher",
    "snmptrap",
    "linux_audit",
    "sun_streams",
    "java",
    #[cfg(not(feature = "kafka"))]
    "kafka",
    "mqtt",
    "opentelemetry",
    "http",
    "osquery",
    "default_network_drivers",
    "syslog_ng",
    "pacct",
    "mbox",
    "nodejs",
    "darwin_oslog",
    "hypr_audit_trail",
    "hypr_app_audit_trail",
    "network_load_balancer",
    "example_msg_generator",
    "example_random_generator",
];

/// Builds the source driver `node` stands for.
pub fn build(node: &Node, cx: &SourceContext) -> Result<Built, ConfigError> {
    let driver = declared::find(
        node,
        ("source", "source driver"),
        DRIVERS,
        |d| d.names,
        NOT_YET,
    )?;
    let parts: Vec<&[Declared]> = std::iter::once(SourceOptions::DECLARED)
        .chain(driver.options.iter().copied())
        .collect();
    let mut o = Options::check_parts(node, &parts)?;
    let mut opts = SourceOptions::new(cx.globals);
    o.apply(SourceOptions::DECLARED, |opt| opts.apply(opt))?;
    // Drivers that read streams of lines declare these.
    let first = |p: &[Declared]| p.first().map(|d| d.name);
    if driver.options.iter().any(|p| first(p) == first(MULTI_LINE)) {
        o.apply(MULTI_LINE, |opt| opts.apply(opt))?;
    }
    let multi_line = opts.multi_line.build()?;
    let built = (driver.build)(
        node,
        &mut o,
        Common {
            cx,
            opts,
            multi_line,
        },
    )?;
    o.finish()?;
    Ok(built)
}

/// Every driver of this registry, for the configuration reference.
pub fn reference() -> Vec<sluice_config::declared::Entry> {
    DRIVERS
        .iter()
        .map(|f| sluice_config::declared::Entry {
            names: f.names.to_vec(),
            about: f.about,
            sample: f.sample,
            options: std::iter::once(SourceOptions::DECLARED)
                .chain(f.options.iter().copied())
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Globals;
    use std::sync::Arc;

    /// Builds a source statement's driver from `text`, as a configuration would.
    fn build_text(text: &str) -> Result<(), String> {
        sluice_config::declared::build_one("source", text, |node| {
            let cx = SourceContext {
                globals: &Globals::new(),
                stats: &Arc::default(),
                name: &Arc::from("s"),
                id: 0,
                n: 0,
            };
            build(node, &cx).map(drop)
        })
    }

    /// Each source driver is built once with each option it and every source declare: an
    /// option is accepted exactly when the driver reads it.
    #[test]
    fn every_source_reads_every_option_it_declares() {
        let dir = tempfile::tempdir().unwrap();
        let (key, cert) = (dir.path().join("k.pem"), dir.path().join("c.pem"));
        let made = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ])
            .args(["-nodes", "-subj", "/CN=sluice", "-days", "1", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl makes the test's certificate");
        assert!(made.status.success(), "{made:?}");
        for driver in DRIVERS {
            let parts: Vec<&[Declared]> = std::iter::once(SourceOptions::DECLARED)
                .chain(driver.options.iter().copied())
                .collect();
            sluice_config::declared::every_option_is_read_in(driver.sample, &parts, |text| {
                build_text(
                    &text
                        .replace("\"/k\"", &format!("\"{}\"", key.display()))
                        .replace("\"/c\"", &format!("\"{}\"", cert.display())),
                )
            });
        }
    }

    /// Every source refuses an option no table of it declares, naming the option and the
    /// options it has.
    #[test]
    fn every_source_refuses_an_option_it_does_not_declare() {
        for driver in DRIVERS {
            let refused =
                sluice_config::declared::an_undeclared_option_is_refused(driver.sample, build_text);
            assert!(
                refused.contains("log-iw-size"),
                "{}: {refused}",
                driver.names[0]
            );
        }
    }

    /// A driver name is found once: no two declarations claim it, and none is also "not yet".
    #[test]
    fn every_driver_name_is_declared_once() {
        let names = DRIVERS.iter().flat_map(|d| d.names.iter().copied());
        sluice_config::declared::each_name_once(names, NOT_YET);
    }
}
