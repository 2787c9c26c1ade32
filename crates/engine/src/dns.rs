//! The sender's name for `$HOST_FROM` (and `$HOST` unless `keep-hostname(yes)`).
//!
//! With `use-dns(yes)` (syslog-ng's default) the peer address is resolved by reverse DNS,
//! cached for `dns-cache-expire()` seconds; without it, or when resolution fails, the address
//! itself is the name. `use-fqdn(no)` keeps only the first label of a resolved name.
//! Lookups block, so they run on threads of their own, [`LOOKUPS`] at most at once, one per
//! address however many connections wait on it; a connection waits [`CONNECTION_WAIT`] at
//! most (a new datagram peer [`DATAGRAM_WAIT`]) and takes the address as its name when the
//! resolver is slower (the answer, when it comes, is cached for the next). A dead resolver therefore holds neither threads nor the stop:
//! the lookup threads are not the runtime's, and the process does not wait for them.
//! `dns-cache-hosts()` names addresses from a file before DNS is asked ([`Hosts`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

#[derive(Clone, Debug)]
pub struct NameOptions {
    pub use_dns: bool,
    pub use_fqdn: bool,
    pub normalize: bool,
    pub cache_expire: Duration,
    /// `dns-cache-hosts()`, when the source caches names (`dns-cache(yes)`, the default).
    pub hosts: Option<Arc<Hosts>>,
}

/// `dns-cache-hosts("/etc/hosts.syslog")`: names for addresses from a file in the form of
/// `/etc/hosts`, taken before DNS is asked, as syslog-ng takes them. The file is looked at
/// again at most once a second and read again when it changed; while it is missing it
/// names nothing.
#[derive(Debug)]
pub struct Hosts {
    path: PathBuf,
    state: Mutex<HostsState>,
}

#[derive(Debug)]
struct HostsState {
    looked: Instant,
    modified: Option<SystemTime>,
    names: HashMap<IpAddr, Arc<str>>,
}

impl Hosts {
    /// Reads `path` now: a file that cannot be read is a configuration error, not an empty
    /// list found out later.
    pub fn open(path: &Path) -> std::io::Result<Hosts> {
        let modified = std::fs::metadata(path)?.modified().ok();
        let names = parse_hosts(&std::fs::read(path)?);
        Ok(Hosts {
            path: path.to_owned(),
            state: Mutex::new(HostsState {
                looked: Instant::now(),
                modified,
                names,
            }),
        })
    }

    /// The file's name for `ip`, reading the file again first if it changed.
    fn name(&self, ip: IpAddr) -> Option<Arc<str>> {
        let mut s = self.state.lock().expect("hosts lock");
        if s.looked.elapsed() >= Duration::from_secs(1) {
            s.looked = Instant::now();
            match std::fs::metadata(&self.path).and_then(|m| m.modified()) {
                Err(_) => {
                    s.modified = None;
                    s.names.clear();
                }
                Ok(m) if Some(m) != s.modified => {
                    s.modified = Some(m);
                    s.names = std::fs::read(&self.path)
                        .map(|text| parse_hosts(&text))
                        .unwrap_or_default();
                }
                Ok(_) => {}
            }
        }
        s.names.get(&ip).cloned()
    }
}

/// Each line `address name [aliases…]` names the address by its first name; a later line
/// for the same address wins (as in syslog-ng); `#` starts a comment.
fn parse_hosts(text: &[u8]) -> HashMap<IpAddr, Arc<str>> {
    let mut names = HashMap::new();
    for line in String::from_utf8_lossy(text).lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_ascii_whitespace();
        if let (Some(addr), Some(name)) = (words.next(), words.next()) {
            if let Ok(ip) = addr.parse::<IpAddr>() {
                names.insert(ip, Arc::from(name));
            }
        }
    }
    names
}

type Cache = Mutex<HashMap<IpAddr, (Arc<[u8]>, Instant)>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The most names the cache keeps; past that it starts afresh.
const CACHE_LIMIT: usize = 100_000;

/// The name of a peer, or of this machine for local sources (`None`). Only a name that is
/// not known yet costs a lookup, run off the reactor: a burst of new connections with
/// `use-dns(no)` is accepted without any thread hand-off. A lookup slower than `wait` leaves
/// the address as the name ([`CONNECTION_WAIT`], [`DATAGRAM_WAIT`]).
pub async fn name_of(addr: Option<IpAddr>, opts: &NameOptions, wait: Duration) -> Arc<[u8]> {
    match known(addr, opts) {
        Ok(name) => name,
        Err(ip) => {
            let mut answer = looked_up(ip, opts);
            let name = match tokio::time::timeout(wait, answer.wait_for(Option::is_some)).await {
                Ok(Ok(name)) => name.clone(),
                // A slow resolver: the address, this time.
                _ => None,
            };
            name.unwrap_or_else(|| address(ip))
        }
    }
}

/// Lookups run at once at most; more wait for one of them to end.
const LOOKUPS: usize = 16;

/// How long a connection waits for its name before it takes its address instead.
pub const CONNECTION_WAIT: Duration = Duration::from_secs(3);

/// How long a datagram from a new peer waits: the reader of every peer waits with it.
pub const DATAGRAM_WAIT: Duration = Duration::from_millis(100);

type Answer = tokio::sync::watch::Receiver<Option<Arc<[u8]>>>;

/// The lookups under way, by address: every connection from one address waits on one.
fn under_way() -> &'static Mutex<HashMap<IpAddr, Answer>> {
    static UNDER_WAY: OnceLock<Mutex<HashMap<IpAddr, Answer>>> = OnceLock::new();
    UNDER_WAY.get_or_init(Mutex::default)
}

/// The answer for `ip`: of the lookup under way for it, or of one started now (once one of
/// the [`LOOKUPS`] is free) on a thread of its own.
fn looked_up(ip: IpAddr, opts: &NameOptions) -> Answer {
    static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(LOOKUPS);
    let mut lookups = under_way().lock().expect("lookups lock");
    if let Some(answer) = lookups.get(&ip) {
        return answer.clone();
    }
    let (tell, answer) = tokio::sync::watch::channel(None);
    lookups.insert(ip, answer.clone());
    drop(lookups);
    let opts = opts.clone();
    tokio::spawn(async move {
        let slot = SLOTS
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let (done, name) = tokio::sync::oneshot::channel();
        let started = std::thread::Builder::new()
            .name("sluice-dns".into())
            .spawn(move || {
                let _slot = slot;
                let _ = done.send(lookup(ip, &opts));
            });
        let name = match started {
            Ok(_) => name.await.unwrap_or_else(|_| address(ip)),
            Err(_) => address(ip),
        };
        let _ = tell.send(Some(name));
        under_way().lock().expect("lookups lock").remove(&ip);
    });
    answer
}

/// An address as a name.
fn address(ip: IpAddr) -> Arc<[u8]> {
    Arc::from(ip.to_string().as_bytes())
}

/// The name of a peer when no lookup is needed (local sources, `use-dns(no)`, a cached
/// name), or the address that must be looked up.
fn known(addr: Option<IpAddr>, opts: &NameOptions) -> Result<Arc<[u8]>, IpAddr> {
    let Some(ip) = addr else {
        return Ok(local_name(opts.use_fqdn));
    };
    if !opts.use_dns {
        return Ok(address(ip));
    }
    if let Some(name) = opts.hosts.as_ref().and_then(|h| h.name(ip)) {
        return Ok(shown(&name, opts));
    }
    let cache = cache().lock().expect("dns cache lock");
    match cache.get(&ip) {
        Some((name, at)) if at.elapsed() < opts.cache_expire => Ok(name.clone()),
        _ => Err(ip),
    }
}

/// Asks DNS for the name of `ip` (blocking) and caches the answer; the address itself
/// stands in when there is none.
fn lookup(ip: IpAddr, opts: &NameOptions) -> Arc<[u8]> {
    let name: Arc<[u8]> = match reverse(ip) {
        Some(name) => shown(&name, opts),
        None => address(ip),
    };
    let mut c = cache().lock().expect("dns cache lock");
    if c.len() >= CACHE_LIMIT {
        c.clear();
    }
    c.insert(ip, (name.clone(), Instant::now()));
    name
}

/// A resolved name as the source shows it: its first label unless `use-fqdn(yes)`, in
/// lower case with `normalize-hostnames(yes)`.
fn shown(name: &str, opts: &NameOptions) -> Arc<[u8]> {
    let name = if opts.use_fqdn {
        name
    } else {
        name.split('.').next().unwrap_or(name)
    };
    if opts.normalize {
        Arc::from(name.to_ascii_lowercase().as_bytes())
    } else {
        Arc::from(name.as_bytes())
    }
}

/// This machine's name: short, or as configured when `use-fqdn(yes)`.
pub fn local_name(fqdn: bool) -> Arc<[u8]> {
    Arc::from(sluice_model::macros::local_hostname(fqdn))
}

fn reverse(ip: IpAddr) -> Option<String> {
    let addr = socket2::SockAddr::from(std::net::SocketAddr::new(ip, 0));
    let mut host = [0 as libc::c_char; 1025];
    // SAFETY: `addr` holds a valid sockaddr of `addr.len()` bytes; `host` is a writable buffer
    // whose length we pass; no service buffer is requested.
    let rc = unsafe {
        libc::getnameinfo(
            addr.as_ptr() as *const libc::sockaddr,
            addr.len(),
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: getnameinfo wrote a NUL-terminated string into `host` on success.
    let name = unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) };
    name.to_str().ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_without_dns_and_loopback_with_it() {
        let no_dns = NameOptions {
            use_dns: false,
            use_fqdn: false,
            normalize: false,
            cache_expire: Duration::from_secs(60),
            hosts: None,
        };
        assert_eq!(
            &*known(Some("10.0.0.1".parse().unwrap()), &no_dns).unwrap(),
            b"10.0.0.1"
        );
        let dns = NameOptions {
            use_dns: true,
            ..no_dns
        };
        // /etc/hosts names 127.0.0.1 "localhost" on every Debian machine.
        assert_eq!(&*lookup("127.0.0.1".parse().unwrap(), &dns), b"localhost");
    }

    /// A hosts file names its addresses before DNS does, as the source shows names, and is
    /// read again when it changes; `use-dns(no)` shows addresses whatever it says. (An
    /// address no other test puts in the process's DNS cache.)
    #[test]
    fn a_hosts_file_names_addresses_before_dns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        std::fs::write(
            &path,
            "# the lab\n192.0.2.7\tLab-Server.example.com lab  # the first name counts\n\
             ::1 six.example.com\nnot-an-address nobody\n10.0.0.9\n",
        )
        .unwrap();
        let hosts = Arc::new(Hosts::open(&path).unwrap());
        let opts = NameOptions {
            use_dns: true,
            use_fqdn: true,
            normalize: false,
            cache_expire: Duration::from_secs(60),
            hosts: Some(hosts.clone()),
        };
        let name = |ip: &str, opts: &NameOptions| known(Some(ip.parse().unwrap()), opts);
        assert_eq!(
            &*name("192.0.2.7", &opts).unwrap(),
            b"Lab-Server.example.com"
        );
        assert_eq!(&*name("::1", &opts).unwrap(), b"six.example.com");
        assert!(name("10.0.0.9", &opts).is_err(), "no name: DNS is asked");
        let short = NameOptions {
            use_fqdn: false,
            normalize: true,
            ..opts.clone()
        };
        assert_eq!(&*name("192.0.2.7", &short).unwrap(), b"lab-server");
        let no_dns = NameOptions {
            use_dns: false,
            ..opts.clone()
        };
        assert_eq!(&*name("192.0.2.7", &no_dns).unwrap(), b"192.0.2.7");

        std::fs::write(&path, "192.0.2.7 renamed\n").unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        hosts.state.lock().unwrap().looked -= Duration::from_secs(2);
        assert_eq!(&*name("192.0.2.7", &opts).unwrap(), b"renamed");
        std::fs::remove_file(&path).unwrap();
        hosts.state.lock().unwrap().looked -= Duration::from_secs(2);
        assert!(
            name("192.0.2.7", &opts).is_err(),
            "a removed file names nothing"
        );
        assert!(Hosts::open(&path).is_err());
    }
}
