//! TLS for stream sources and forwarding destinations: the `tls()` block as syslog-ng spells
//! it, turned into rustls configurations.
//!
//! A source (`transport(tls)`) gets a [`rustls::ServerConfig`]; its connections are read
//! through `tokio-rustls` and the peer's certificate subject becomes `.tls.x509_cn`,
//! `.tls.x509_o` and `.tls.x509_ou` ([`PeerInfo`]). A destination gets a
//! [`rustls::ClientConfig`] that its sender thread drives over a blocking socket.
//!
//! `peer-verify()` means what it means in syslog-ng: *required* fails a handshake without a
//! certificate, *trusted* checks the certificate against `ca-file()`/`ca-dir()` (and the CRLs
//! of `crl-dir()`); `trusted-dn()` and `trusted-keys()` then narrow the trusted ones. Untrusted
//! modes accept any certificate (its signature over the handshake is still checked: the peer
//! holds the key).

pub use reloading::Reloading;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring as provider, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime,
};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
    SupportedCipherSuite, SupportedProtocolVersion,
};
use sluice_config::declared::{not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node, Pos};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod openssl_trust;
pub mod reloading;
pub use openssl_trust::{explain, explain_io};
use openssl_trust::{Anchors, Refused};

/// The largest piece of plaintext handed to rustls at once; see [`write_plaintext`].
const PLAINTEXT_PIECE: usize = 2048;

/// Writes all of `data` to a TLS writer (a connection's `writer()`, a rustls `Stream`) in
/// slices of at most 2 KiB. rustls copies plaintext into each record with one `memcpy` per
/// slice it is given, and glibc 2.36 (Debian 12) copies more than 2,112 bytes with
/// `rep movsb`, which on AMD EPYC runs at 2.8 GB/s instead of 60–90 GB/s when source and
/// destination are misaligned the way a record's payload (5 bytes past its header) usually
/// is: it took 44 % of a TLS sender's CPU (`sluice loggen -U`). Smaller copies are done with
/// vector registers at full speed whatever the alignment.
pub fn write_plaintext(w: &mut impl std::io::Write, mut data: &[u8]) -> std::io::Result<()> {
    use std::io::{ErrorKind, IoSlice};
    while !data.is_empty() {
        let mut pieces = [IoSlice::new(&[]); 32];
        let mut count = 0;
        for (slot, piece) in pieces.iter_mut().zip(data.chunks(PLAINTEXT_PIECE)) {
            *slot = IoSlice::new(piece);
            count += 1;
        }
        match w.write_vectored(&pieces[..count]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `peer-verify()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerVerify {
    RequiredTrusted,
    RequiredUntrusted,
    OptionalTrusted,
    OptionalUntrusted,
}

impl PeerVerify {
    fn required(self) -> bool {
        matches!(
            self,
            PeerVerify::RequiredTrusted | PeerVerify::RequiredUntrusted
        )
    }

    fn trusted(self) -> bool {
        matches!(
            self,
            PeerVerify::RequiredTrusted | PeerVerify::OptionalTrusted
        )
    }
}

/// The `tls()` block of a source or destination.
#[derive(Clone, Debug)]
pub struct TlsOptions {
    pub key_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub ca_dir: Option<PathBuf>,
    pub crl_dir: Option<PathBuf>,
    /// `pkcs12-file()`: the key, its certificate and the CA certificates in one PKCS#12 file
    /// (without a password, as syslog-ng reads it).
    pub pkcs12_file: Option<PathBuf>,
    pub peer_verify: PeerVerify,
    /// `trusted-dn()`: patterns (`*` and `?`) of the subjects accepted, as syslog-ng formats
    /// them: `CN=host, O=Example, C=HU`.
    pub trusted_dn: Vec<String>,
    /// `trusted-keys()`: SHA-1 fingerprints of the certificates accepted, `SHA1:00:EF:…`.
    pub trusted_keys: Vec<String>,
    /// `cipher-suite()`: the TLS 1.2 suites (OpenSSL or IANA names) and, in `tls13()`, the
    /// TLS 1.3 ones.
    pub cipher_suite: Option<(String, Pos)>,
    pub cipher_suite_tls13: Option<(String, Pos)>,
    pub no_tls12: bool,
    pub no_tls13: bool,
    pub ignore_hostname_mismatch: bool,
    pub ignore_validity_period: bool,
    /// `sni(yes)`: a destination names the server it connects to in its handshake.
    pub sni: bool,
    /// Where the block stands, for errors found when certificates are read.
    pub pos: Pos,
}

/// Options of the `tls()` block.
/// The options of the `tls()` block, declared as a driver's are: what is refused as
/// unknown or not yet, and what the reference says of each.
pub const TLS: &[Declared] = &[
    read("key_file", "key-file(\"/k\")")
        .about("the private key (PEM) of the certificate sluice shows", "none"),
    read("cert_file", "cert-file(\"/c\")")
        .about("the certificate sluice shows (PEM, its chain after it)", "none"),
    read("ca_file", "ca-file(\"/ca\")").about(
        "certificates (PEM) of the authorities a peer's certificate is checked against",
        "none: the system's (destinations)",
    ),
    read("ca_dir", "ca-dir(\"/cas\")").about(
        "a directory of authorities' certificates, named by hash as `c_rehash` names them",
        "none",
    ),
    read("crl_dir", "crl-dir(\"/crls\")")
        .about("a directory of revocation lists (PEM or DER)", "none"),
    read("pkcs12_file", "pkcs12-file(\"/p12\")")
        .about("the key, the certificate and its chain in one PKCS#12 file", "none"),
    read("peer_verify", "peer-verify(optional-untrusted)").about(
        "whether a peer must show a certificate and whether it must be trusted: `required-trusted`, `required-untrusted`, `optional-trusted`, `optional-untrusted`",
        "required-trusted",
    ),
    read("trusted_dn", "trusted-dn(\"*, O=Example\")").about(
        "distinguished names (with `*`) a trusted peer's certificate must match one of",
        "any",
    ),
    read("trusted_keys", "trusted-keys(\"AA:BB\")").about(
        "SHA-1 fingerprints a trusted peer's certificate must have one of",
        "any",
    ),
    read("cipher_suite", "cipher-suite(\"ECDHE-RSA-AES128-GCM-SHA256\")").about(
        "OpenSSL's names of the cipher suites allowed; `tls12-and-older()` and `tls13()` apart",
        "rustls's",
    ),
    read("ssl_options", "ssl-options(no-tlsv13)").about(
        "`no-tlsv12`, `no-tlsv13`, `ignore-hostname-mismatch`, `ignore-validity-period` (SSL and TLS 1.0/1.1 are never spoken)",
        "none",
    ),
    read("sni", "sni(yes)").about("a destination names the server in its handshake", "no"),
    // Curves and compression are rustls's choice (X25519, P-256, P-384; never compression);
    // an SSL version floor is what ssl-options() says.
    read("ecdh_curve_list", "ecdh-curve-list(\"prime256v1\")")
        .about("accepted: rustls chooses the curves (X25519, P-256, P-384)", ""),
    read("allow_compress", "allow-compress(no)")
        .about("accepted: TLS compression is never used", ""),
    read("ssl_version", "ssl-version(\"tlsv1_2\")")
        .about("accepted: the versions spoken are what `ssl-options()` leaves", ""),
    not_yet("keylog_file"),
    not_yet("dhparam_file"),
    not_yet("ocsp_stapling_verify"),
    not_yet("sigalgs"),
    not_yet("client_sigalgs"),
];

impl TlsOptions {
    /// Reads a `tls(...)` option node.
    pub fn parse(node: &Node) -> Result<TlsOptions, ConfigError> {
        let mut o = TlsOptions::new(node.pos);
        if let Some(v) = node.first_value() {
            return Err(ConfigError::new(
                v.pos,
                "tls() holds options such as key-file() and cert-file()",
            ));
        }
        o.read(node)?;
        Ok(o)
    }

    /// The options of an empty `tls()` block at `pos`: the server checked against the
    /// system's CAs.
    pub fn new(pos: Pos) -> TlsOptions {
        TlsOptions {
            key_file: None,
            cert_file: None,
            ca_file: None,
            ca_dir: None,
            crl_dir: None,
            pkcs12_file: None,
            peer_verify: PeerVerify::RequiredTrusted,
            trusted_dn: Vec::new(),
            trusted_keys: Vec::new(),
            cipher_suite: None,
            cipher_suite_tls13: None,
            no_tls12: false,
            no_tls13: false,
            ignore_hostname_mismatch: false,
            ignore_validity_period: false,
            sni: false,
            pos,
        }
    }

    /// Reads the options of the `tls(...)` node into these.
    fn read(&mut self, node: &Node) -> Result<(), ConfigError> {
        let o = self;
        let mut table = Options::check(node, TLS)?;
        table.apply(TLS, |opt| {
            match opt.key().as_str() {
                "key_file" => o.key_file = Some(opt.string()?.into()),
                "cert_file" => o.cert_file = Some(opt.string()?.into()),
                "ca_file" => o.ca_file = Some(opt.string()?.into()),
                "ca_dir" => o.ca_dir = Some(opt.string()?.into()),
                "crl_dir" => o.crl_dir = Some(opt.string()?.into()),
                "pkcs12_file" => o.pkcs12_file = Some(opt.string()?.into()),
                "peer_verify" => {
                    let v = opt.value()?;
                    o.peer_verify = match crate_normalize(&v.text).as_str() {
                        "required_trusted" | "yes" => PeerVerify::RequiredTrusted,
                        "required_untrusted" => PeerVerify::RequiredUntrusted,
                        "optional_trusted" => PeerVerify::OptionalTrusted,
                        "optional_untrusted" | "none" | "no" => PeerVerify::OptionalUntrusted,
                        _ => {
                            return Err(ConfigError::unknown(
                                v.pos,
                                "peer-verify() mode",
                                &v.text,
                                "",
                                &[
                                    "required-trusted",
                                    "required-untrusted",
                                    "optional-trusted",
                                    "optional-untrusted",
                                ],
                            ))
                        }
                    }
                }
                "trusted_dn" => o
                    .trusted_dn
                    .extend(opt.words()?.into_iter().map(|v| v.text.clone())),
                "trusted_keys" => o.trusted_keys.extend(
                    opt.words()?
                        .into_iter()
                        .map(|v| v.text.to_ascii_uppercase()),
                ),
                "cipher_suite" => {
                    for v in opt.values() {
                        o.cipher_suite = Some((v.text.clone(), v.pos));
                    }
                    for inner in opt.options() {
                        let v = inner.value()?;
                        match inner.key().as_str() {
                            "tls12_and_older" => o.cipher_suite = Some((v.text.clone(), v.pos)),
                            "tls13" => o.cipher_suite_tls13 = Some((v.text.clone(), v.pos)),
                            _ => return Err(inner.unknown_in(opt, &["tls12-and-older", "tls13"])),
                        }
                    }
                }
                "ssl_options" => {
                    for v in opt.words()? {
                        match crate_normalize(&v.text).as_str() {
                            // rustls speaks neither SSL nor TLS 1.0/1.1.
                            "no_sslv2" | "no_sslv3" | "no_tlsv1" | "no_tlsv11" | "none" => {}
                            "no_tlsv12" => o.no_tls12 = true,
                            "no_tlsv13" => o.no_tls13 = true,
                            // A peer that closes without close_notify is always a clean close.
                            "ignore_unexpected_eof" => {}
                            "ignore_hostname_mismatch" => o.ignore_hostname_mismatch = true,
                            "ignore_validity_period" => o.ignore_validity_period = true,
                            _ => {
                                return Err(ConfigError::unknown(
                                    v.pos,
                                    "ssl-options() value",
                                    &v.text,
                                    "",
                                    &[
                                        "no-sslv2",
                                        "no-sslv3",
                                        "no-tlsv1",
                                        "no-tlsv11",
                                        "no-tlsv12",
                                        "no-tlsv13",
                                        "ignore-unexpected-eof",
                                        "ignore-hostname-mismatch",
                                        "ignore-validity-period",
                                    ],
                                ))
                            }
                        }
                    }
                }
                "sni" => o.sni = opt.bool()?,
                // Curves and compression are rustls's choice (X25519, P-256, P-384; never
                // compression); an SSL version floor is what ssl-options() says.
                "ecdh_curve_list" | "allow_compress" | "ssl_version" => {
                    opt.value()?;
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        table.finish()?;
        if o.no_tls12 && o.no_tls13 {
            return Err(ConfigError::new(
                node.pos,
                "ssl-options() turns off TLS 1.2 and TLS 1.3: nothing is left to speak",
            ));
        }
        Ok(())
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.pos, message)
    }

    fn provider(&self) -> Result<Arc<CryptoProvider>, ConfigError> {
        let mut p = provider::default_provider();
        let tls12 = match &self.cipher_suite {
            Some((list, pos)) => Some(suites(list, *pos, false)?),
            None => None,
        };
        let tls13 = match &self.cipher_suite_tls13 {
            Some((list, pos)) => Some(suites(list, *pos, true)?),
            None => None,
        };
        p.cipher_suites.retain(|s| {
            let is13 = s.version() == &rustls::version::TLS13;
            let chosen = if is13 { &tls13 } else { &tls12 };
            chosen
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n == &suite_name(*s)))
        });
        if p.cipher_suites.is_empty() {
            return Err(self.error("cipher-suite() leaves no cipher suite rustls implements"));
        }
        // AES-128-GCM first: as safe for logs as AES-256 and a third cheaper per byte; a
        // server picks by its own order (`ignore_client_order`).
        p.cipher_suites
            .sort_by_key(|s| !suite_name(*s).contains("AES_128_GCM"));
        Ok(Arc::new(p))
    }

    fn versions(&self) -> Vec<&'static SupportedProtocolVersion> {
        let mut v = Vec::new();
        if !self.no_tls13 {
            v.push(&rustls::version::TLS13);
        }
        if !self.no_tls12 {
            v.push(&rustls::version::TLS12);
        }
        v
    }

    /// The certificate chain and key this side presents, if `cert-file()` is given.
    pub(crate) fn identity(&self) -> Result<Option<Identity>, ConfigError> {
        if let Some(identity) = self.pkcs12()? {
            return Ok(Some(identity));
        }
        let (cert, key) = match (&self.cert_file, &self.key_file) {
            (None, None) => return Ok(None),
            (Some(_), None) => return Err(self.error("cert-file() needs key-file()")),
            (None, Some(_)) => return Err(self.error("key-file() needs cert-file()")),
            (Some(c), Some(k)) => (c, k),
        };
        let chain = certificates(cert).map_err(|e| self.error(e))?;
        if chain.is_empty() {
            return Err(self.error(format!(
                "cert-file({}) holds no PEM certificate",
                cert.display()
            )));
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
            self.error(format!(
                "key-file({}): no private key could be read: {e}",
                key.display()
            ))
        })?;
        Ok(Some((chain, key)))
    }

    /// The key and the certificates of `pkcs12-file()`: the chain, its own certificate first.
    fn pkcs12(&self) -> Result<Option<Identity>, ConfigError> {
        let Some(path) = &self.pkcs12_file else {
            return Ok(None);
        };
        let data = std::fs::read(path)
            .map_err(|e| self.error(format!("pkcs12-file({}): {e}", path.display())))?;
        let store = p12_keystore::KeyStore::from_pkcs12(
            &data,
            "",
            p12_keystore::Pkcs12ImportPolicy::default(),
        )
        .map_err(|e| self.error(format!("pkcs12-file({}): {e}", path.display())))?;
        let (_, chain) = store.private_key_chain().ok_or_else(|| {
            self.error(format!(
                "pkcs12-file({}) holds no private key with its certificate",
                path.display()
            ))
        })?;
        let certs = chain
            .certs()
            .iter()
            .map(|c| CertificateDer::from(c.as_der().to_vec()))
            .collect();
        let key = PrivateKeyDer::Pkcs8(chain.key().as_der().to_vec().into());
        Ok(Some((certs, key)))
    }

    /// The CA certificates of `ca-file()`, `ca-dir()` and `pkcs12-file()` (all of the
    /// `identity` read from it but its own certificate).
    /// The trusted CAs for webpki, and the same certificates as read for what OpenSSL
    /// trusts beyond it ([`Anchors`]).
    fn roots(
        &self,
        identity: Option<&Identity>,
    ) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), ConfigError> {
        let mut roots = RootCertStore::empty();
        let mut read = Vec::new();
        if let (Some(_), Some((chain, _))) = (&self.pkcs12_file, identity) {
            roots.add_parsable_certificates(chain.iter().skip(1).cloned());
            read.extend(chain.iter().skip(1).cloned());
        }
        let mut files: Vec<PathBuf> = self.ca_file.iter().cloned().collect();
        if let Some(dir) = &self.ca_dir {
            files.extend(dir_files(dir).map_err(|e| self.error(e))?);
        }
        for file in files {
            let certs = match certificates(&file) {
                Ok(certs) => certs,
                // A hashed CA directory holds other files too (CRLs, links that went stale).
                Err(_) if self.ca_file.as_ref() != Some(&file) => continue,
                Err(e) => return Err(self.error(e)),
            };
            for cert in certs {
                read.push(cert.clone());
                roots.add(cert).map_err(|e| {
                    self.error(format!(
                        "{}: a CA certificate cannot be used: {e}",
                        file.display()
                    ))
                })?;
            }
        }
        Ok((roots, read))
    }

    fn crls(&self) -> Result<Vec<CertificateRevocationListDer<'static>>, ConfigError> {
        let Some(dir) = &self.crl_dir else {
            return Ok(Vec::new());
        };
        let mut crls = Vec::new();
        for file in dir_files(dir).map_err(|e| self.error(e))? {
            if let Ok(iter) = CertificateRevocationListDer::pem_file_iter(&file) {
                crls.extend(iter.flatten());
            }
        }
        Ok(crls)
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            trusted_dn: self.trusted_dn.clone(),
            trusted_keys: self.trusted_keys.clone(),
        }
    }

    /// A listening source's configuration, built again when its files change
    /// ([`reloading`]).
    pub fn server(&self) -> Result<Arc<Reloading<rustls::ServerConfig>>, ConfigError> {
        Reloading::load(self, TlsOptions::server_config)
    }

    /// A forwarding destination's configuration, built again when its files change
    /// ([`reloading`]).
    pub fn client(&self) -> Result<Arc<Reloading<rustls::ClientConfig>>, ConfigError> {
        Reloading::load(self, TlsOptions::client_config)
    }

    /// The configuration of a listening source, with `identity` read from its files.
    fn server_config(
        &self,
        identity: Option<Identity>,
    ) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
        let provider = self.provider()?;
        let identity =
            identity.ok_or_else(|| self.error("a TLS source needs key-file() and cert-file()"))?;
        let mode = self.peer_verify;
        let mut anchors = Anchors::default();
        let trusted = if mode.trusted() {
            let (roots, read) = self.roots(Some(&identity))?;
            anchors = Anchors {
                certs: read,
                crls: self.crls()?,
            };
            if roots.is_empty() {
                return Err(self.error(
                    "peer-verify(required-trusted) and peer-verify(optional-trusted) check clients against ca-file() or ca-dir(): give one, or say peer-verify(optional-untrusted)",
                ));
            }
            let mut b =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .with_crls(self.crls()?)
                    // syslog-ng: a CRL directory without the CA's CRL is not an error.
                    .allow_unknown_revocation_status();
            if !mode.required() {
                b = b.allow_unauthenticated();
            }
            Some(
                b.build()
                    .map_err(|e| self.error(format!("the client verifier cannot be built: {e}")))?,
            )
        } else {
            None
        };
        let verifier = Arc::new(ClientVerifier {
            mode,
            trusted,
            anchors,
            constraints: self.constraints(),
            algorithms: provider.signature_verification_algorithms,
            ignore_validity_period: self.ignore_validity_period,
        });
        let (chain, key) = identity;
        let own = openssl_trust::certified_key(chain, key, &provider).map_err(|e| self.error(e))?;
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&self.versions())
            .map_err(|e| self.error(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(openssl_trust::OwnCertificate(own)));
        // No TLS 1.3 session tickets: syslog clients do not resume sessions, and a ticket a
        // client never reads makes its close a reset, which can discard the end of what it
        // sent before sluice read it.
        let mut config = config;
        config.send_tls13_tickets = 0;
        config.ignore_client_order = true;
        Ok(Arc::new(config))
    }

    /// The configuration of a forwarding destination, with `identity` read from its files.
    fn client_config(
        &self,
        identity: Option<Identity>,
    ) -> Result<Arc<rustls::ClientConfig>, ConfigError> {
        let provider = self.provider()?;
        let mode = self.peer_verify;
        let mut anchors = Anchors::default();
        let trusted = if mode.trusted() {
            let (mut roots, read) = self.roots(identity.as_ref())?;
            anchors = Anchors {
                certs: read,
                crls: self.crls()?,
            };
            if self.ca_file.is_none() && self.ca_dir.is_none() && self.pkcs12_file.is_none() {
                // As OpenSSL does without ca-file(): the system's CAs.
                if let Ok(certs) = certificates(Path::new(SYSTEM_CAS)) {
                    roots.add_parsable_certificates(certs);
                }
            }
            if roots.is_empty() {
                return Err(self.error(format!(
                    "peer-verify(required-trusted) checks the server against ca-file() or ca-dir() (or {SYSTEM_CAS}), and none holds a CA certificate"
                )));
            }
            let crls = self.crls()?;
            let mut b = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            );
            if !crls.is_empty() {
                b = b.with_crls(crls).allow_unknown_revocation_status();
            }
            Some(
                b.build()
                    .map_err(|e| self.error(format!("the server verifier cannot be built: {e}")))?,
            )
        } else {
            None
        };
        let verifier = Arc::new(ServerVerifier {
            trusted,
            anchors,
            constraints: self.constraints(),
            algorithms: provider.signature_verification_algorithms,
            ignore_hostname_mismatch: self.ignore_hostname_mismatch,
            ignore_validity_period: self.ignore_validity_period,
        });
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&self.versions())
            .map_err(|e| self.error(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match identity {
            // rustls reads v3 certificates only; syslog-ng (OpenSSL) sends a v1 one too.
            Some((chain, key)) if openssl_trust::is_v1(&chain[0]) => {
                let own = openssl_trust::certified_key(chain, key, &provider)
                    .map_err(|e| self.error(e))?;
                builder.with_client_cert_resolver(Arc::new(openssl_trust::OwnCertificate(own)))
            }
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| self.error(format!("cert-file() and key-file() do not match: {e}")))?,
            None => builder.with_no_client_auth(),
        };
        config.enable_sni = self.sni;
        Ok(Arc::new(config))
    }
}

/// A client configuration that accepts any server certificate: `sluice loggen -U`, which (as
/// syslog-ng's loggen) checks nothing. Handshake signatures are still verified.
pub fn unverified_client() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(provider::default_provider());
    let verifier = Arc::new(ServerVerifier {
        trusted: None,
        anchors: Anchors::default(),
        constraints: Constraints {
            trusted_dn: Vec::new(),
            trusted_keys: Vec::new(),
        },
        algorithms: provider.signature_verification_algorithms,
        ignore_hostname_mismatch: true,
        ignore_validity_period: true,
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the ring provider speaks TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Arc::new(config)
}

/// A certificate chain (this side's own certificate first) and its private key.
pub(crate) type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// Debian's bundle of the system's CA certificates (package `ca-certificates`).
const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// `-` and `_` alike, lower case: how syslog-ng compares option values.
fn crate_normalize(s: &str) -> String {
    s.to_ascii_lowercase().replace('-', "_")
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let iter = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
    iter.collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate file: {e}", path.display()))
}

/// The regular files of a directory (following links, as OpenSSL's hashed directories have).
fn dir_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{}: cannot be read: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

/// The name a `cipher-suite()` list uses for `suite`: IANA's, as rustls prints it.
fn suite_name(suite: SupportedCipherSuite) -> String {
    format!("{:?}", suite.suite())
}

/// The IANA names of the suites in an OpenSSL or IANA cipher list. Names of suites rustls does
/// not implement are left out; OpenSSL's keywords (`HIGH`, `!aNULL`) are an error, since what
/// they select is OpenSSL's to say.
fn suites(list: &str, pos: Pos, tls13: bool) -> Result<Vec<String>, ConfigError> {
    let mut names = Vec::new();
    for token in list.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
        let iana = match token {
            "ECDHE-ECDSA-AES128-GCM-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "ECDHE-ECDSA-AES256-GCM-SHA384" => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "ECDHE-ECDSA-CHACHA20-POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "ECDHE-RSA-AES128-GCM-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "ECDHE-RSA-AES256-GCM-SHA384" => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "ECDHE-RSA-CHACHA20-POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_AES_128_GCM_SHA256" => "TLS13_AES_128_GCM_SHA256",
            "TLS_AES_256_GCM_SHA384" => "TLS13_AES_256_GCM_SHA384",
            "TLS_CHACHA20_POLY1305_SHA256" => "TLS13_CHACHA20_POLY1305_SHA256",
            t if t.starts_with("TLS_") || t.starts_with("TLS13_") => t,
            t if t.contains('-') && !t.starts_with(['!', '-', '+', '@']) => {
                // An OpenSSL suite rustls does not implement (CBC, DHE, RSA key exchange).
                continue;
            }
            t => {
                return Err(ConfigError::new(
                    pos,
                    format!(
                        "cipher-suite(): '{t}' is an OpenSSL cipher-list keyword; name the {} suites, such as {}",
                        if tls13 { "TLS 1.3" } else { "TLS 1.2" },
                        if tls13 {
                            "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"
                        } else {
                            "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES256-GCM-SHA384"
                        }
                    ),
                ))
            }
        };
        names.push(iana.to_string());
    }
    Ok(names)
}

/// What narrows the trusted peers: `trusted-dn()` and `trusted-keys()`.
#[derive(Debug)]
struct Constraints {
    trusted_dn: Vec<String>,
    trusted_keys: Vec<String>,
}

impl Constraints {
    fn check(&self, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        if !self.trusted_keys.is_empty() {
            let fp = fingerprint(end_entity);
            if !self.trusted_keys.contains(&fp) {
                return Err(rustls::Error::General(format!(
                    "the certificate's fingerprint {fp} is not among trusted-keys()"
                )));
            }
        }
        if !self.trusted_dn.is_empty() {
            let dn = PeerInfo::of(end_entity).map(|p| p.dn).unwrap_or_default();
            if !self.trusted_dn.iter().any(|p| glob(p, &dn)) {
                return Err(rustls::Error::General(format!(
                    "the certificate's subject '{dn}' matches no trusted-dn()"
                )));
            }
        }
        Ok(())
    }
}

/// The SHA-1 fingerprint of a certificate as `trusted-keys()` and `.tls.x509_fp` write it.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    use sha1::Digest;
    let digest = sha1::Sha1::digest(cert.as_ref());
    let hex: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
    format!("SHA1:{}", hex.join(":"))
}

/// `*` (any run) and `?` (any one character) patterns, as GLib's `g_pattern_match_simple`.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// When `err` is only about the validity period and `ignore-validity-period` is on, the time
/// at which the certificate is valid, to verify again with.
fn valid_time(err: &rustls::Error, cert: &CertificateDer<'_>) -> Option<UnixTime> {
    let period = matches!(
        err,
        rustls::Error::InvalidCertificate(
            CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. }
        )
    );
    if !period {
        return None;
    }
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let start = parsed.validity().not_before.timestamp().max(0) as u64 + 1;
    Some(UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        start,
    )))
}

/// A refusal of `end_entity` that names it, for [`explain`].
fn refused(
    end_entity: &CertificateDer<'_>,
    error: CertificateError,
    name: Option<String>,
) -> rustls::Error {
    Refused {
        subject: PeerInfo::of(end_entity).map_or_else(|| "?".into(), |p| p.dn),
        error,
        name,
    }
    .into_error()
}

/// Checks client certificates as `peer-verify()` says.
#[derive(Debug)]
struct ClientVerifier {
    mode: PeerVerify,
    trusted: Option<Arc<dyn ClientCertVerifier>>,
    /// What OpenSSL trusts beyond webpki.
    anchors: Anchors,
    constraints: Constraints,
    algorithms: WebPkiSupportedAlgorithms,
    ignore_validity_period: bool,
}

impl ClientCertVerifier for ClientVerifier {
    fn offer_client_auth(&self) -> bool {
        // syslog-ng (OpenSSL's SSL_VERIFY_NONE) does not ask for a certificate in
        // optional-untrusted mode.
        self.mode != PeerVerify::OptionalUntrusted
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mode.required()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        match &self.trusted {
            Some(v) => v.root_hint_subjects(),
            None => &[],
        }
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let Some(trusted) = &self.trusted else {
            return Ok(ClientCertVerified::assertion());
        };
        let verdict = trusted
            .verify_client_cert(end_entity, intermediates, now)
            .or_else(|e| {
                match valid_time(&e, end_entity).filter(|_| self.ignore_validity_period) {
                    Some(then) => trusted.verify_client_cert(end_entity, intermediates, then),
                    None => Err(e),
                }
            });
        if let Err(e) = verdict {
            let openssl = self
                .anchors
                .accepts(end_entity, now, self.ignore_validity_period);
            match (openssl, e) {
                (Some(Ok(())), _) => {}
                (Some(Err(error)), _) | (None, rustls::Error::InvalidCertificate(error)) => {
                    return Err(refused(end_entity, error, None))
                }
                (None, other) => return Err(other),
            }
        }
        self.constraints.check(end_entity)?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if openssl_trust::is_v1(cert) {
            return openssl_trust::verify_v1_signature(message, cert, dss, &self.algorithms);
        }
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if openssl_trust::is_v1(cert) {
            return openssl_trust::verify_v1_signature(message, cert, dss, &self.algorithms);
        }
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Checks a server's certificate as `peer-verify()` says; its name is checked against the
/// server's address as given in the destination, falling back to the subject's CN (as
/// syslog-ng does) for certificates without subjectAltName.
#[derive(Debug)]
struct ServerVerifier {
    trusted: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    /// What OpenSSL trusts beyond webpki.
    anchors: Anchors,
    constraints: Constraints,
    algorithms: WebPkiSupportedAlgorithms,
    ignore_hostname_mismatch: bool,
    ignore_validity_period: bool,
}

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(trusted) = &self.trusted else {
            return Ok(ServerCertVerified::assertion());
        };
        let mut result =
            trusted.verify_server_cert(end_entity, intermediates, server_name, ocsp, now);
        if let Some(then) = result
            .as_ref()
            .err()
            .and_then(|e| valid_time(e, end_entity))
            .filter(|_| self.ignore_validity_period)
        {
            result = trusted.verify_server_cert(end_entity, intermediates, server_name, ocsp, then);
        }
        if let Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) = &result
        {
            let cn_matches = PeerInfo::of(end_entity)
                .is_some_and(|p| name_matches(&p.cn, &server_name.to_str()));
            if self.ignore_hostname_mismatch || cn_matches {
                // Everything but the name was checked first: verify again under the name the
                // certificate has.
                let other = ServerName::try_from("sluice.invalid").expect("valid name");
                result = match trusted.verify_server_cert(
                    end_entity,
                    intermediates,
                    &other,
                    ocsp,
                    now,
                ) {
                    Err(rustls::Error::InvalidCertificate(
                        CertificateError::NotValidForName
                        | CertificateError::NotValidForNameContext { .. },
                    )) => Ok(ServerCertVerified::assertion()),
                    other => other,
                };
            }
        }
        if let Err(e) = result {
            let openssl = self
                .anchors
                .accepts(end_entity, now, self.ignore_validity_period);
            let name = server_name.to_str();
            match (openssl, e) {
                (Some(Ok(())), _)
                    if self.ignore_hostname_mismatch
                        || openssl_trust::is_for(end_entity, &name) => {}
                (Some(Ok(())), _) => {
                    return Err(refused(
                        end_entity,
                        CertificateError::NotValidForName,
                        Some(name.into_owned()),
                    ))
                }
                (Some(Err(error)), _) | (None, rustls::Error::InvalidCertificate(error)) => {
                    return Err(refused(end_entity, error, Some(name.into_owned())))
                }
                (None, other) => return Err(other),
            }
        }
        self.constraints.check(end_entity)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if openssl_trust::is_v1(cert) {
            return openssl_trust::verify_v1_signature(message, cert, dss, &self.algorithms);
        }
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if openssl_trust::is_v1(cert) {
            return openssl_trust::verify_v1_signature(message, cert, dss, &self.algorithms);
        }
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A certificate name (`*.example.com` allowed) against a host name, case aside.
fn name_matches(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match pattern.strip_prefix("*.") {
        Some(rest) => host
            .split_once('.')
            .is_some_and(|(first, tail)| !first.is_empty() && tail == rest),
        None => pattern == host,
    }
}

/// What a peer's certificate says of it: the subject's CN, O and OU (`.tls.x509_cn`, …) and
/// the whole subject as `trusted-dn()` matches it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerInfo {
    pub cn: String,
    pub o: String,
    pub ou: String,
    pub dn: String,
}

impl PeerInfo {
    /// Reads the subject of a DER certificate; `None` if it does not parse.
    pub fn of(cert: &CertificateDer<'_>) -> Option<PeerInfo> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
        let subject = parsed.subject();
        let first = |attrs: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue>| {
            attrs
                .next()
                .and_then(|a| a.as_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let mut rdns: Vec<String> = Vec::new();
        for rdn in subject.iter() {
            let parts: Vec<String> = rdn
                .iter()
                .map(|a| {
                    let key = x509_parser::objects::oid2abbrev(
                        a.attr_type(),
                        x509_parser::objects::oid_registry(),
                    )
                    .map(str::to_string)
                    .unwrap_or_else(|_| a.attr_type().to_id_string());
                    let value = a
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|_| format!("#{}", hex_of(a.attr_value().data)));
                    format!("{key}={}", escape_2253(&value))
                })
                .collect();
            rdns.push(parts.join(" + "));
        }
        rdns.reverse();
        let cn = first(&mut subject.iter_common_name());
        let o = first(&mut subject.iter_organization());
        let ou = first(&mut subject.iter_organizational_unit());
        Some(PeerInfo {
            cn,
            o,
            ou,
            dn: rdns.join(", "),
        })
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// A DN attribute value escaped as RFC 2253 (and OpenSSL's `ESC_2253`) says.
fn escape_2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block is read once with each option its table declares: an option is accepted
    /// exactly when it is read.
    #[test]
    fn every_tls_option_is_read() {
        sluice_config::declared::every_option_is_read("tls()", TLS, |text| {
            sluice_config::declared::build_one(
                "destination",
                &format!("tcp(\"h\" {text})"),
                |node| {
                    let opt = node.options().find(|o| o.key() == "tls").expect("tls()");
                    TlsOptions::parse(opt).map(drop)
                },
            )
        });
    }

    /// A writer that takes at most 3,000 bytes of the slices it is given, and records the
    /// largest slice.
    struct Stingy {
        taken: Vec<u8>,
        largest: usize,
    }

    impl std::io::Write for Stingy {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.write_vectored(&[std::io::IoSlice::new(buf)])
        }

        fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
            let mut room = 3000;
            for b in bufs {
                self.largest = self.largest.max(b.len());
                let n = b.len().min(room);
                self.taken.extend_from_slice(&b[..n]);
                room -= n;
            }
            Ok(3000 - room)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn plaintext_goes_whole_in_small_slices() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut w = Stingy {
            taken: Vec::new(),
            largest: 0,
        };
        write_plaintext(&mut w, &data).unwrap();
        assert_eq!(w.taken, data);
        assert!(w.largest <= PLAINTEXT_PIECE);
    }

    #[test]
    fn glob_is_glibs_simple_pattern() {
        assert!(glob(
            "*, O=Example Inc, ST=*, C=*",
            "CN=a, O=Example Inc, ST=S, C=HU"
        ));
        assert!(!glob("*, O=Example Inc, C=*", "CN=a, O=Other, C=HU"));
        assert!(glob("CN=h?st*", "CN=host1"));
        assert!(glob("*", ""));
        assert!(!glob("a", ""));
    }

    #[test]
    fn certificate_names_match_hosts() {
        assert!(name_matches("*.example.com", "Log.Example.com"));
        assert!(!name_matches("*.example.com", "example.com"));
        assert!(name_matches("localhost", "LOCALHOST"));
    }

    #[test]
    fn openssl_cipher_names_become_rustls_suites() {
        let pos = Pos::default();
        assert_eq!(
            suites("ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA", pos, false).unwrap(),
            ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
        );
        assert!(suites("HIGH:!aNULL", pos, false).is_err());
        let all: Vec<String> = provider::default_provider()
            .cipher_suites
            .iter()
            .map(|s| suite_name(*s))
            .collect();
        for name in suites("TLS_AES_128_GCM_SHA256", pos, true).unwrap() {
            assert!(all.contains(&name), "{name} not in {all:?}");
        }
    }

    #[test]
    fn dn_values_are_escaped() {
        assert_eq!(escape_2253("a, b+c"), "a\\, b\\+c");
        assert_eq!(escape_2253(" x "), "\\ x\\ ");
    }
}
