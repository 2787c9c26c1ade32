//! The sender's name for `$HOST_FROM` (and `$HOST` unless `keep-hostname(yes)`).
//!
//! With `use-dns(yes)` (syslog-ng's default) the peer address is resolved by reverse DNS,
//! cached for `dns-cache-expire()` seconds; without it, or when resolution fails, the address
//! itself is the name. `use-fqdn(no)` keeps only the first label of a resolved name.
//! Lookups block, so callers run them off the reactor (once per connection, once per new UDP
//! peer).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct NameOptions {
    pub use_dns: bool,
    pub use_fqdn: bool,
    pub normalize: bool,
    pub cache_expire: Duration,
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
/// `use-dns(no)` is accepted without any thread hand-off.
pub async fn name_of(addr: Option<IpAddr>, opts: &NameOptions) -> Arc<[u8]> {
    match known(addr, opts) {
        Ok(name) => name,
        Err(ip) => {
            let opts = opts.clone();
            tokio::task::spawn_blocking(move || lookup(ip, &opts))
                .await
                .expect("name lookups do not panic")
        }
    }
}

/// The name of a peer when no lookup is needed (local sources, `use-dns(no)`, a cached
/// name), or the address that must be looked up.
fn known(addr: Option<IpAddr>, opts: &NameOptions) -> Result<Arc<[u8]>, IpAddr> {
    let Some(ip) = addr else {
        return Ok(local_name(opts.use_fqdn));
    };
    if !opts.use_dns {
        return Ok(Arc::from(ip.to_string().as_bytes()));
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
        Some(name) => {
            let name = if opts.use_fqdn {
                name.as_str()
            } else {
                name.split('.').next().unwrap_or(&name)
            };
            let name = if opts.normalize {
                name.to_ascii_lowercase()
            } else {
                name.to_string()
            };
            Arc::from(name.as_bytes())
        }
        None => Arc::from(ip.to_string().as_bytes()),
    };
    let mut c = cache().lock().expect("dns cache lock");
    if c.len() >= CACHE_LIMIT {
        c.clear();
    }
    c.insert(ip, (name.clone(), Instant::now()));
    name
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
}
