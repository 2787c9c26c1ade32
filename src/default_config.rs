//! The configuration sluice runs when it is given none: a central log server that accepts
//! syslog over UDP and TCP (and RFC5424 with octet counting on the syslog port) and writes one
//! file per sending host and day. Unprivileged, it uses ports above 1024 and a folder in the
//! working directory.

#[derive(Clone)]
pub struct Default {
    pub text: String,
    /// One line saying where it listens and writes.
    pub summary: String,
}

pub fn for_this_user() -> Default {
    // SAFETY: geteuid has no preconditions.
    for_user(unsafe { libc::geteuid() } == 0)
}

/// The default of root (the one the package installs as `/etc/sluice/sluice.conf`), or of
/// another user.
fn for_user(root: bool) -> Default {
    let (udp, tcp, syslog, dir) = if root {
        (514, 514, 601, "/var/log/sluice")
    } else {
        (5514, 5514, 5601, "./sluice-logs")
    };
    let text = format!(
        r#"@version: 3.38
# sluice's embedded default configuration: `sluice --print-default-config` prints it.
# Copy it to /etc/sluice/sluice.conf to change it.

options {{
    keep-hostname(yes);   # name files after the host in the message, not the relay
    use-dns(no);
    create-dirs(yes);
    dir-perm(0755);
    perm(0640);
}};

source s_network {{
    network(port({udp}) transport(udp));
    network(port({tcp}) transport(tcp) max-connections(1000));
    syslog(port({syslog}) transport(tcp) max-connections(1000));
}};

source s_internal {{
    internal();
}};

destination d_per_host {{
    file("{dir}/${{HOST}}/${{YEAR}}-${{MONTH}}-${{DAY}}.log");
}};

log {{
    source(s_network);
    source(s_internal);
    destination(d_per_host);
}};
"#
    );
    let summary = if root {
        format!("listening on {udp}/udp, {tcp}/tcp and {syslog}/tcp (RFC5424), writing {dir}/HOST/YYYY-MM-DD.log")
    } else {
        format!("not running as root, so listening on {udp}/udp, {tcp}/tcp and {syslog}/tcp (RFC5424) instead of 514/514/601, writing {dir}/HOST/YYYY-MM-DD.log")
    };
    Default { text, summary }
}

#[cfg(test)]
mod tests {
    /// The package's `/etc/sluice/sluice.conf` is root's embedded default, word for word.
    #[test]
    fn the_packaged_configuration_is_roots_default() {
        let packaged = include_str!("../packaging/sluice.conf");
        assert_eq!(
            packaged,
            super::for_user(true).text,
            "packaging/sluice.conf drifted: write it again with `sudo sluice --print-default-config`"
        );
    }
}
