//! TLS configurations built from their files and built again on `sluice ctl reload` (and
//! SIGHUP) and when one of the files changes (looked at every 5 s), without touching a
//! connection: the next handshake uses the new configuration, the ones under way go on with
//! theirs. Everything a `tls()` block reads is watched: the own certificate and key
//! (`cert-file()`, `key-file()`, `pkcs12-file()`), the CAs that peers are checked against
//! (`ca-file()`, every file of `ca-dir()`) and the revocation lists (`crl-dir()`), for
//! sources and destinations alike. Files that cannot be used (unreadable, a key that is not
//! the certificate's) leave the configuration in use in place, said once per change.
//!
//! Each own certificate's end of validity is a gauge (`tls;;CERT-FILE;a;expires_at`,
//! seconds since the epoch), and sluice warns once a day from 30 days before it.

use super::{Identity, TlsOptions};
use crate::own_log;
use crate::stats::Registry;
use sluice_config::ConfigError;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

/// How long before a certificate's end sluice starts warning.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(30 * 86400);

/// What tells the files changed: each one's path, length, inode and time of change.
type FileState = Vec<(PathBuf, Option<(u64, u64, SystemTime)>)>;

/// Builds a configuration from the options and the own identity read from their files.
type Build<C> = fn(&TlsOptions, Option<Identity>) -> Result<Arc<C>, ConfigError>;

/// A TLS configuration (rustls's `ServerConfig` for a source, `ClientConfig` for a
/// destination) as its files say now; [`Reloading::current`] at each handshake.
pub struct Reloading<C> {
    options: TlsOptions,
    build: Build<C>,
    current: RwLock<Arc<C>>,
    /// The own certificate's `notAfter`, seconds since the epoch; 0 without one.
    not_after: AtomicU64,
    /// The files as they were when last read, and as they were when a failure was said.
    files: Mutex<(FileState, Option<FileState>)>,
    /// When the expiry was last warned about, seconds since the epoch.
    warned: AtomicU64,
}

impl<C: Send + Sync + 'static> std::fmt::Debug for Reloading<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// What [`refresh_all`] and [`watch`] do with any configuration, whatever it configures.
trait Refresh: Send + Sync {
    fn refresh(&self, force: bool);
    fn name(&self) -> String;
    fn not_after(&self) -> u64;
    fn warned(&self) -> &AtomicU64;
}

/// The configurations of the running sources and destinations.
static LIVE: Mutex<Vec<Weak<dyn Refresh>>> = Mutex::new(Vec::new());

impl<C: Send + Sync + 'static> Reloading<C> {
    /// Builds the configuration `options` describe with `build` and lists it with those
    /// [`refresh_all`] and [`watch`] look after.
    pub fn load(options: &TlsOptions, build: Build<C>) -> Result<Arc<Reloading<C>>, ConfigError> {
        let files = file_state(options);
        let (config, not_after) = built(options, build)?;
        let reloading = Arc::new(Reloading {
            options: options.clone(),
            build,
            current: RwLock::new(config),
            not_after: AtomicU64::new(not_after),
            files: Mutex::new((files, None)),
            warned: AtomicU64::new(0),
        });
        let weak: Weak<dyn Refresh> = Arc::downgrade(&reloading) as Weak<dyn Refresh>;
        let mut live = LIVE.lock().expect("TLS configurations lock");
        live.retain(|c| c.strong_count() > 0);
        live.push(weak);
        Ok(reloading)
    }

    /// The configuration for the next handshake.
    pub fn current(&self) -> Arc<C> {
        self.current.read().expect("TLS configuration lock").clone()
    }
}

impl<C: Send + Sync + 'static> Refresh for Reloading<C> {
    /// Builds the configuration again if a file changed since it was read (or always,
    /// `force`).
    fn refresh(&self, force: bool) {
        let now = file_state(&self.options);
        let mut files = self.files.lock().expect("TLS files lock");
        if !force && now == files.0 {
            return;
        }
        match built(&self.options, self.build).map_err(|e| e.message) {
            Ok((config, not_after)) => {
                *self.current.write().expect("TLS configuration lock") = config;
                self.not_after.store(not_after, Ordering::Relaxed);
                self.warned.store(0, Ordering::Relaxed);
                if now != files.0 {
                    own_log::notice(format!(
                        "TLS files of {} read again; new connections use them",
                        self.name()
                    ));
                }
                *files = (now, None);
            }
            Err(e) => {
                if files.1.as_ref() != Some(&now) {
                    own_log::error(format!(
                        "TLS files of {} cannot be read again, the ones in use stay: {e}",
                        self.name()
                    ));
                    files.1 = Some(now);
                }
            }
        }
    }

    /// The file that names the configuration in messages and statistics: the own
    /// certificate's, or the CA's.
    fn name(&self) -> String {
        let o = &self.options;
        [
            &o.cert_file,
            &o.pkcs12_file,
            &o.ca_file,
            &o.ca_dir,
            &o.crl_dir,
        ]
        .into_iter()
        .flatten()
        .next()
        .map_or_else(
            || "a tls() block without files".to_string(),
            |p| p.display().to_string(),
        )
    }

    fn not_after(&self) -> u64 {
        self.not_after.load(Ordering::Relaxed)
    }

    fn warned(&self) -> &AtomicU64 {
        &self.warned
    }
}

/// The configuration `build` makes of the options, and the end of the own certificate's
/// validity (0 without one): the certificate and key are read once for both, so the
/// gauge is always that of the certificate in use.
fn built<C>(options: &TlsOptions, build: Build<C>) -> Result<(Arc<C>, u64), ConfigError> {
    let identity = options.identity()?;
    let not_after = match &identity {
        None => 0,
        Some((chain, _)) => X509Certificate::from_der(chain[0].as_ref())
            .map(|(_, c)| c.validity().not_after.timestamp().max(1) as u64)
            .map_err(|e| options.error(format!("cert-file() cannot be read: {e}")))?,
    };
    Ok((build(options, identity)?, not_after))
}

/// Every file the options read, with what tells it changed; a directory's files as it
/// lists them now (a file added or removed is a change).
fn file_state(options: &TlsOptions) -> FileState {
    use std::os::unix::fs::MetadataExt;
    let o = options;
    let mut paths: Vec<PathBuf> = [&o.cert_file, &o.key_file, &o.pkcs12_file, &o.ca_file]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    for dir in [&o.ca_dir, &o.crl_dir].into_iter().flatten() {
        let mut listed: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        listed.sort();
        paths.push(dir.clone());
        paths.extend(listed);
    }
    paths
        .into_iter()
        .map(|p| {
            let seen = std::fs::metadata(&p)
                .ok()
                .and_then(|m| Some((m.len(), m.ino(), m.modified().ok()?)));
            (p, seen)
        })
        .collect()
}

/// Builds every live configuration again (`sluice ctl reload`, SIGHUP).
pub fn refresh_all() {
    for config in live() {
        config.refresh(true);
    }
}

fn live() -> Vec<Arc<dyn Refresh>> {
    let mut live = LIVE.lock().expect("TLS configurations lock");
    live.retain(|c| c.strong_count() > 0);
    live.iter().filter_map(Weak::upgrade).collect()
}

/// Every 5 s: builds again the configurations whose files changed, keeps each own
/// certificate's `expires_at` gauge, and warns once a day about one that ends within 30
/// days.
pub async fn watch(stats: Arc<Registry>) {
    let mut tick = crate::stats::every(Duration::from_secs(5));
    loop {
        tick.tick().await;
        let now = crate::clock::unix_now();
        for config in live() {
            config.refresh(false);
            let not_after = config.not_after();
            if not_after == 0 {
                continue;
            }
            let name = config.name();
            stats
                .counter("tls", "", &name, "expires_at")
                .store(not_after, Ordering::Relaxed);
            let warned = config.warned();
            if not_after < now + EXPIRY_WARNING.as_secs()
                && now >= warned.load(Ordering::Relaxed) + 86400
            {
                warned.store(now, Ordering::Relaxed);
                let left = not_after.saturating_sub(now);
                let when = if left == 0 {
                    "has expired: peers that check it refuse the connection".to_string()
                } else {
                    format!(
                        "expires in {} days {} hours",
                        left / 86400,
                        left % 86400 / 3600
                    )
                };
                own_log::warning(format!(
                    "TLS certificate {name} {when}; put the new one in place (it is read when the file changes)"
                ));
            }
        }
    }
}
