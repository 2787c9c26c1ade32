//! A TLS source's own certificate and key, read again from their files on `sluice ctl
//! reload` (and SIGHUP) and when they change on disk (looked at every 5 s), without touching
//! a connection: the next handshake presents the new certificate, the ones under way go on
//! with theirs. New files that cannot be used (unreadable, a key that is not the
//! certificate's) leave the one in use in place, said once per change.
//!
//! Each certificate's end of validity is a gauge (`tls;;CERT-FILE;a;expires_at`,
//! seconds since the epoch), and sluice warns once a day from 30 days before it.

use super::TlsOptions;
use crate::own_log;
use crate::stats::Registry;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

/// How long before a certificate's end sluice starts warning.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(30 * 86400);

/// What tells a file changed: its length, inode and time of change.
type FileState = Vec<Option<(u64, u64, SystemTime)>>;

/// A listening source's certificate, as rustls asks for it at each handshake.
#[derive(Debug)]
pub struct ServerCert {
    options: TlsOptions,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The certificate's `notAfter`, seconds since the epoch.
    not_after: AtomicU64,
    /// The files as they were when last read, and as they were when a failure was said.
    files: Mutex<(FileState, Option<FileState>)>,
    /// When the expiry was last warned about, seconds since the epoch.
    warned: AtomicU64,
}

/// The certificates of the running configurations' sources, for [`refresh_all`].
static LIVE: Mutex<Vec<Weak<ServerCert>>> = Mutex::new(Vec::new());

impl ServerCert {
    /// Reads the certificate and key `options` name, checks that they belong together and
    /// lists the certificate with those [`refresh_all`] and [`watch`] look after.
    pub fn load(
        options: &TlsOptions,
        provider: Arc<CryptoProvider>,
    ) -> Result<Arc<ServerCert>, String> {
        let files = file_state(options);
        let (key, not_after) = read(options, &provider)?;
        let cert = Arc::new(ServerCert {
            options: options.clone(),
            provider,
            current: RwLock::new(key),
            not_after: AtomicU64::new(not_after),
            files: Mutex::new((files, None)),
            warned: AtomicU64::new(0),
        });
        let mut live = LIVE.lock().expect("certificates lock");
        live.retain(|c| c.strong_count() > 0);
        live.push(Arc::downgrade(&cert));
        Ok(cert)
    }

    /// The file that names the certificate in messages and statistics.
    fn name(&self) -> String {
        self.options
            .cert_file
            .as_ref()
            .or(self.options.pkcs12_file.as_ref())
            .map_or_else(String::new, |p| p.display().to_string())
    }

    /// Reads the files again if they changed since they were read (or always, `force`);
    /// returns whether the certificate in use was replaced.
    fn refresh(&self, force: bool) -> bool {
        let now = file_state(&self.options);
        let mut files = self.files.lock().expect("certificate files lock");
        if !force && now == files.0 {
            return false;
        }
        match read(&self.options, &self.provider) {
            Ok((key, not_after)) => {
                *self.current.write().expect("certificate lock") = key;
                self.not_after.store(not_after, Ordering::Relaxed);
                self.warned.store(0, Ordering::Relaxed);
                *files = (now, None);
                own_log::notice(format!(
                    "TLS certificate {} read again; new connections are offered it",
                    self.name()
                ));
                true
            }
            Err(e) => {
                if files.1.as_ref() != Some(&now) {
                    own_log::error(format!(
                        "TLS certificate {} cannot be read again, the one in use stays: {e}",
                        self.name()
                    ));
                    files.1 = Some(now);
                }
                false
            }
        }
    }
}

impl ResolvesServerCert for ServerCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("certificate lock").clone())
    }
}

/// The chain and key `options` name, checked to belong together, and the end of the
/// certificate's validity.
fn read(
    options: &TlsOptions,
    provider: &CryptoProvider,
) -> Result<(Arc<CertifiedKey>, u64), String> {
    let (chain, key) = options
        .identity()
        .map_err(|e| e.message)?
        .ok_or("a TLS source needs key-file() and cert-file()")?;
    let not_after = X509Certificate::from_der(chain[0].as_ref())
        .map(|(_, c)| c.validity().not_after.timestamp().max(0) as u64)
        .map_err(|e| format!("cert-file() cannot be read: {e}"))?;
    let key = super::openssl_trust::certified_key(chain, key, provider)?;
    Ok((key, not_after))
}

fn file_state(options: &TlsOptions) -> FileState {
    use std::os::unix::fs::MetadataExt;
    [&options.cert_file, &options.key_file, &options.pkcs12_file]
        .into_iter()
        .flatten()
        .map(|p| {
            let m = std::fs::metadata(p).ok()?;
            Some((m.len(), m.ino(), m.modified().ok()?))
        })
        .collect()
}

/// Reads every live certificate again (`sluice ctl reload`, SIGHUP).
pub fn refresh_all() {
    for cert in live() {
        cert.refresh(true);
    }
}

fn live() -> Vec<Arc<ServerCert>> {
    let mut live = LIVE.lock().expect("certificates lock");
    live.retain(|c| c.strong_count() > 0);
    live.iter().filter_map(Weak::upgrade).collect()
}

/// Every 5 s: reads again the certificates whose files changed, keeps each one's
/// `expires_at` gauge, and warns once a day about one that ends within 30 days.
pub async fn watch(stats: Arc<Registry>) {
    let mut tick = crate::stats::every(Duration::from_secs(5));
    loop {
        tick.tick().await;
        let now = crate::stats::unix_now();
        for cert in live() {
            cert.refresh(false);
            let name = cert.name();
            let not_after = cert.not_after.load(Ordering::Relaxed);
            stats
                .counter("tls", "", &name, "expires_at")
                .store(not_after, Ordering::Relaxed);
            let warned = cert.warned.load(Ordering::Relaxed);
            if not_after < now + EXPIRY_WARNING.as_secs() && now >= warned + 86400 {
                cert.warned.store(now, Ordering::Relaxed);
                let left = not_after.saturating_sub(now);
                let when = if left == 0 {
                    "has expired: clients that check it refuse the connection".to_string()
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
