//! The destination drivers of this version: one line each. A driver is a folder beside this
//! file whose declaration says its names, its options (in parts shared between drivers: how
//! messages are formatted, how they are queued), a valid use and its build
//! ([`DestinationDriver`]); [`build`] finds a statement's driver here, holds the node against
//! its table, builds it and refuses an option it declared and did not read. A driver
//! syslog-ng has and sluice does not is in [`NOT_YET`].

use super::driver::{Built, DestinationContext, DestinationDriver};
use sluice_config::declared::{self, Options};
use sluice_config::{ConfigError, Node};

/// Every destination driver, in the order "did you mean" and the reference list them.
pub static DRIVERS: &[&DestinationDriver] = &[
    &super::file::DRIVER,
    &super::logstore::DRIVER,
    &super::stdout::DRIVER,
    &super::network::DRIVER,
    &super::network::PER_TRANSPORT,
    &super::graylog2::DRIVER,
    &super::unix::DRIVER,
    &super::usertty::DRIVER,
    &super::pipe::DRIVER,
    &super::program::DRIVER,
    #[cfg(feature = "http")]
    &super::http::DRIVER,
    #[cfg(feature = "http")]
    &super::elasticsearch::DRIVER,
    #[cfg(feature = "kafka")]
    &super::kafka_c::DRIVER,
    #[cfg(feature = "sql")]
    &super::sql::DRIVER,
    #[cfg(feature = "mongodb")]
    &super::mongodb::DRIVER,
];

/// Destination drivers of syslog-ng that sluice does not have yet.
pub const NOT_YET: &[&str] = &[
    #[cfg(not(feature = "sql"))]
    "sql",
    #[cfg(not(feature = "mongodb"))]
    "mongodb",
    "kafka",
    #[cfg(not(feature = "kafka"))]
    "kafka_c",
    "elasticsearch",
    #[cfg(not(feature = "http"))]
    "elasticsearch_http",
    #[cfg(not(feature = "http"))]
    "opensearch",
    #[cfg(not(feature = "http"))]
    "http",
    "riemann",
    "smtp",
    "snmp",
    "hdfs",
    "redis",
    "stomp",
    "amqp",
    "python",
    "java",
    "loggly",
    "logmatic",
    "splunk_hec_event",
    "graphite",
    "mqtt",
    "syslog_ng",
    "bigquery",
    "loki",
    "opentelemetry",
    "s3",
    "elasticsearch2",
    "slack",
    "telegram",
    "discord",
    "sumologic_http",
    "sumologic_syslog",
    "collectd",
    "osquery",
    "pubsub",
    "google_pubsub",
    "logscale",
    "openobserve",
];

/// Builds the destination driver `node` stands for.
pub fn build(node: &Node, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let driver = declared::find(
        node,
        ("destination", "destination driver"),
        DRIVERS,
        |d| d.names,
        NOT_YET,
    )?;
    let mut o = Options::check_parts(node, driver.options)?;
    let built = (driver.build)(node, &mut o, cx)?;
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
            options: f.options.to_vec(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destinations::logstore;
    use crate::options::Globals;
    use crate::stats::Registry;
    use sluice_model::template::Names;
    use std::sync::Arc;

    /// Builds a destination statement's driver from `text`, its example files made real.
    fn build_text(text: &str) -> Result<(), String> {
        let mut text = text.to_string();
        for (example, here) in logstore::EXAMPLE_FILES {
            text = text.replace(example, here);
        }
        sluice_config::declared::build_one("destination", &text, |node| {
            let cx = DestinationContext {
                globals: &Globals::new(),
                names: &Names::default(),
                stats: &Arc::new(Registry::default()),
                name: "d",
                n: 0,
            };
            build(node, &cx).map(drop)
        })
    }

    /// Each destination driver is built once with each option it declares: an option is
    /// accepted exactly when the driver reads it.
    #[test]
    fn every_destination_reads_every_option_it_declares() {
        for driver in DRIVERS {
            sluice_config::declared::every_option_is_read_in(
                driver.sample,
                driver.options,
                build_text,
            );
        }
    }

    /// Every destination refuses an option no table of it declares, naming the option and
    /// the ones it has.
    #[test]
    fn every_destination_refuses_an_option_it_does_not_declare() {
        for driver in DRIVERS {
            let refused =
                sluice_config::declared::an_undeclared_option_is_refused(driver.sample, build_text);
            assert!(
                refused.contains("valid options"),
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
