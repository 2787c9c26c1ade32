//! `udp-balancer()`: one sender's datagrams spread over every listener, nothing lost at a
//! rate the machine keeps up with; and, for every UDP source, the kernel's drops counted when
//! the socket is not read (a flow-controlled path whose destination takes nothing).

mod common;

use common::{ctl, free_udp_port, wait_until, Running, Server};
use std::time::Duration;

/// The counters of `sluice ctl stats` whose names hold `part`, by name.
fn counters(s: &Running, part: &str) -> Vec<(String, u64)> {
    let (_, text) = ctl(s, &["stats"]);
    text.lines()
        .filter(|l| l.contains(part))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(';')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// `sluice loggen -D` sending `count` datagrams on each of `conns` sockets, at `rate` a second
/// each.
fn loggen_udp(port: u16, conns: u32, count: u64, rate: u64) {
    let report = common::loggen_wait(common::loggen_start_with(&["-D"], port, conns, count, rate));
    assert!(report.ok, "{}", report.text);
}

#[test]
fn one_sender_is_spread_over_every_listener() {
    let port = free_udp_port();
    let s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ udp-balancer(ip(127.0.0.1) port({port}) listeners(4) so-rcvbuf(8388608)); }};
            destination d {{ file("@OUT@/all.log"); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    std::thread::sleep(Duration::from_millis(500));
    let count = 2 * 20_000;
    loggen_udp(port, 2, count / 2, 10_000);
    let total = |s: &Running| -> u64 {
        counters(s, ";a;processed")
            .iter()
            .filter(|(n, _)| n.starts_with("src.udp-balancer;s#0;udp,127.0.0.1#"))
            .map(|(_, v)| v)
            .sum()
    };
    wait_until(Duration::from_secs(20), || total(&s) >= count);
    let got = total(&s);
    assert!(
        count - got <= count / 1000,
        "{got} of {count} arrived\n{}",
        s.stderr()
    );
    let shares: Vec<u64> = (0..4)
        .map(|k| {
            counters(
                &s,
                &format!("src.udp-balancer;s#0;udp,127.0.0.1#{k};a;processed"),
            )
            .first()
            .map_or(0, |(_, v)| *v)
        })
        .collect();
    for (k, share) in shares.iter().enumerate() {
        assert!(
            *share > count / 8,
            "listener {k} carried {share} of {count}: {shares:?}"
        );
    }
}

#[test]
fn the_kernels_drops_are_counted_when_the_socket_is_not_read() {
    let port = free_udp_port();
    // A peer that accepts and never reads: the window is spent, the socket is not read.
    let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let peer_port = peer.local_addr().unwrap().port();
    let s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ udp(ip(127.0.0.1) port({port}) so-rcvbuf(4096) log-iw-size(100)); }};
            destination d {{ tcp("127.0.0.1" port({peer_port})); }};
            log {{ source(s); destination(d); flags(flow-control); }};"#
        ),
    );
    std::thread::sleep(Duration::from_millis(500));
    let count = 200_000;
    loggen_udp(port, 1, count, 100_000);
    let dropped = |s: &Running| {
        counters(s, ";a;socket_receive_dropped")
            .first()
            .map_or(0, |(_, v)| *v)
    };
    wait_until(Duration::from_secs(10), || dropped(&s) > 0);
    std::thread::sleep(Duration::from_millis(1500));
    let read: u64 = counters(&s, "src.udp;s#0;udp,127.0.0.1;a;processed")
        .first()
        .map_or(0, |(_, v)| *v);
    let lost = dropped(&s);
    assert!(lost > 0, "nothing dropped\n{}", s.stderr());
    // What was neither read nor dropped still sits in the small buffer.
    assert!(
        read + lost <= count && count - (read + lost) < 200,
        "{read} read + {lost} dropped of {count}"
    );
}

#[test]
fn a_reload_keeps_the_balancers_sockets() {
    let port = free_udp_port();
    let config = |tag: &str| {
        format!(
            r#"source s {{ udp-balancer(ip(127.0.0.1) port({port}) listeners(3) so-rcvbuf(4194304) tags("{tag}")); }};
            destination d {{ file("@OUT@/all.log"); }};
            log {{ source(s); destination(d); }};"#
        )
    };
    let s = Running::start(Server::Sluice, &config("a"));
    std::thread::sleep(Duration::from_millis(500));
    let sending = std::thread::spawn(move || loggen_udp(port, 1, 20_000, 10_000));
    for tag in ["b", "c"] {
        std::thread::sleep(Duration::from_millis(600));
        let text = config(tag).replace("@OUT@", &s.out.to_string_lossy());
        std::fs::write(s.dir.path().join("server.conf"), text).unwrap();
        let (ok, said) = ctl(&s, &["reload"]);
        assert!(ok, "{said}");
    }
    sending.join().unwrap();
    let file = s.out.join("all.log");
    let lines = || std::fs::read_to_string(&file).map_or(0, |t| t.lines().count());
    wait_until(Duration::from_secs(20), || lines() >= 20_000);
    assert!(
        20_000 - lines().min(20_000) <= 20,
        "{} of 20000\n{}",
        lines(),
        s.stderr()
    );
}
