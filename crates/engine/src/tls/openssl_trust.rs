//! What OpenSSL — and so syslog-ng — trusts beyond what webpki does, asked only when webpki
//! has refused a peer's certificate:
//!
//! - a certificate that is itself in `ca-file()`/`ca-dir()`: a self-signed certificate made
//!   with `openssl req -x509` (which marks itself a CA, so webpki calls it a CA used as an end
//!   entity) and trusted as its own CA, which is how most people try TLS;
//! - an X.509 v1 certificate (`openssl x509 -req` without extensions) that a trusted CA signed
//!   directly (webpki reads v3 only).
//!
//! Both must be within their validity period (unless `ignore-validity-period(yes)`); a v1
//! certificate also must not be revoked by a CRL of its CA in `crl-dir()`. Then this module
//! turns a refusal into a sentence that names the certificate and says what to do
//! ([`Refused`], [`explain`]).

use rustls::client::danger::HandshakeSignatureValid;
use rustls::client::ResolvesClientCert;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::DigitallySignedStruct;
use rustls::{AlertDescription, CertificateError, OtherError, PeerIncompatible};
use std::sync::Arc;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::{FromDer, GeneralName, X509Version};

/// The certificates of `ca-file()`/`ca-dir()` (and a PKCS#12 file's chain) as read, and the
/// CRLs of `crl-dir()`.
#[derive(Debug, Default)]
pub struct Anchors {
    pub certs: Vec<CertificateDer<'static>>,
    pub crls: Vec<CertificateRevocationListDer<'static>>,
}

impl Anchors {
    /// `None` when neither case applies (webpki's refusal stands); otherwise whether OpenSSL
    /// would accept `end_entity` at `now`.
    pub fn accepts(
        &self,
        end_entity: &CertificateDer<'_>,
        now: UnixTime,
        ignore_validity_period: bool,
    ) -> Option<Result<(), CertificateError>> {
        let (_, cert) = X509Certificate::from_der(end_entity.as_ref()).ok()?;
        let in_store = self.certs.iter().any(|c| c.as_ref() == end_entity.as_ref());
        let issuer = if in_store {
            None
        } else if cert.version() == X509Version::V1 {
            Some(self.issuer_of(&cert)?)
        } else {
            return None;
        };
        let checked = if ignore_validity_period {
            Ok(())
        } else {
            within_validity(&cert, now).and_then(|()| {
                issuer
                    .as_ref()
                    .map_or(Ok(()), |ca| within_validity(ca, now))
            })
        };
        Some(checked.and_then(|()| match &issuer {
            Some(ca) if self.revoked(&cert, ca) => Err(CertificateError::Revoked),
            _ => Ok(()),
        }))
    }

    /// The trusted CA whose name is `cert`'s issuer and whose key verifies its signature.
    fn issuer_of<'a>(&'a self, cert: &X509Certificate<'_>) -> Option<X509Certificate<'a>> {
        self.certs.iter().find_map(|der| {
            let (_, ca) = X509Certificate::from_der(der.as_ref()).ok()?;
            (ca.subject().as_raw() == cert.issuer().as_raw()
                && cert.verify_signature(Some(ca.public_key())).is_ok())
            .then_some(ca)
        })
    }

    /// A CRL that `ca` signed lists `cert`'s serial number.
    fn revoked(&self, cert: &X509Certificate<'_>, ca: &X509Certificate<'_>) -> bool {
        self.crls.iter().any(|der| {
            let Ok((_, crl)) =
                x509_parser::revocation_list::CertificateRevocationList::from_der(der.as_ref())
            else {
                return false;
            };
            crl.issuer().as_raw() == ca.subject().as_raw()
                && crl.verify_signature(ca.public_key()).is_ok()
                && crl
                    .iter_revoked_certificates()
                    .any(|r| r.raw_serial() == cert.raw_serial())
        })
    }
}

fn within_validity(cert: &X509Certificate<'_>, now: UnixTime) -> Result<(), CertificateError> {
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let validity = cert.validity();
    if now < validity.not_before.timestamp() {
        Err(CertificateError::NotValidYet)
    } else if now > validity.not_after.timestamp() {
        Err(CertificateError::Expired)
    } else {
        Ok(())
    }
}

/// Whether a certificate OpenSSL accepted by the rules above is for `name`: one of its
/// subjectAltName DNS names or addresses, or (without any) its CN, as OpenSSL checks.
pub fn is_for(end_entity: &CertificateDer<'_>, name: &str) -> bool {
    let Ok((_, cert)) = X509Certificate::from_der(end_entity.as_ref()) else {
        return false;
    };
    let ip: Option<std::net::IpAddr> = name.parse().ok();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        return san.value.general_names.iter().any(|g| match g {
            GeneralName::DNSName(dns) => super::name_matches(dns, name),
            GeneralName::IPAddress(bytes) => ip.is_some_and(|ip| match ip {
                std::net::IpAddr::V4(v4) => bytes[..] == v4.octets(),
                std::net::IpAddr::V6(v6) => bytes[..] == v6.octets(),
            }),
            _ => false,
        });
    }
    let matches = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .any(|cn| super::name_matches(cn, name));
    matches
}

/// An X.509 v1 certificate, which rustls does not read.
pub fn is_v1(cert: &CertificateDer<'_>) -> bool {
    X509Certificate::from_der(cert.as_ref()).is_ok_and(|(_, c)| c.version() == X509Version::V1)
}

/// A handshake signature by the holder of a v1 certificate, checked with the certificate's
/// public key (rustls's own check reads v3 certificates only).
pub fn verify_v1_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algorithms: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    let bad = || rustls::Error::InvalidCertificate(CertificateError::BadSignature);
    let (_, cert) = X509Certificate::from_der(cert.as_ref()).map_err(|_| bad())?;
    let key = &cert.public_key().subject_public_key.data;
    let candidates = algorithms
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map(|(_, algs)| *algs)
        .ok_or_else(|| {
            rustls::Error::PeerMisbehaved(
                rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
            )
        })?;
    candidates
        .iter()
        .any(|alg| alg.verify_signature(key, message, dss.signature()).is_ok())
        .then(HandshakeSignatureValid::assertion)
        .ok_or_else(bad)
}

/// sluice's own certificate and its key, for rustls to present without reading the
/// certificate (it may be v1): the key is checked against the certificate's public key here.
pub fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, String> {
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("key-file() cannot be used: {e}"))?;
    let (_, cert) = X509Certificate::from_der(chain[0].as_ref())
        .map_err(|e| format!("cert-file() cannot be read: {e}"))?;
    let matches = signing
        .public_key()
        .is_some_and(|spki| spki.as_ref() == cert.public_key().raw);
    if !matches {
        return Err(
            "cert-file() and key-file() do not match: the key is not the certificate's".into(),
        );
    }
    Ok(Arc::new(CertifiedKey::new(chain, signing)))
}

/// The certificate rustls presents whatever the peer asks for (a destination's to its
/// server, a source's to its clients).
#[derive(Debug)]
pub struct OwnCertificate(pub Arc<CertifiedKey>);

impl ResolvesClientCert for OwnCertificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _schemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl rustls::server::ResolvesServerCert for OwnCertificate {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// A peer certificate refused, with its subject: what [`explain`] says of it.
#[derive(Debug)]
pub struct Refused {
    pub subject: String,
    pub error: CertificateError,
    /// The name sluice connected to, for a server certificate.
    pub name: Option<String>,
}

impl Refused {
    /// The refusal as rustls carries it (a bad-certificate alert to the peer).
    pub fn into_error(self) -> rustls::Error {
        rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(self))))
    }
}

impl std::error::Error for Refused {}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "its certificate '{}' ", self.subject)?;
        match &self.error {
            CertificateError::UnknownIssuer => write!(
                f,
                "is not signed by a CA in ca-file() or ca-dir(): add the CA that signed it there (for a self-signed certificate, the certificate itself)"
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => write!(
                f,
                "has expired: renew it (ignore-validity-period(yes) accepts it meanwhile)"
            ),
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                write!(f, "is not valid yet: check the clocks of both machines")
            }
            CertificateError::Revoked => write!(f, "is revoked by a CRL in crl-dir()"),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                write!(
                    f,
                    "is not for the name '{}' sluice connects to: connect by a name it holds, or set ignore-hostname-mismatch(yes)",
                    self.name.as_deref().unwrap_or("?")
                )
            }
            // webpki's own reasons come as text inside `Other`.
            CertificateError::Other(other) if format!("{other:?}").contains("UnsupportedCertVersion") => write!(
                f,
                "is an X.509 v1 certificate that no CA in ca-file() or ca-dir() signed: add that CA"
            ),
            CertificateError::BadSignature => {
                write!(f, "has a signature that does not verify: it was altered or is not what its issuer signed")
            }
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                write!(
                    f,
                    "is not for this use (its extended key usage lacks serverAuth or clientAuth): issue one that allows it"
                )
            }
            CertificateError::Other(other) if format!("{other:?}").contains("CaUsedAsEndEntity") => {
                write!(
                    f,
                    "is a CA certificate (basicConstraints CA:TRUE) that is not itself in ca-file(): put it there to trust it as its own CA, or use a certificate issued for the host"
                )
            }
            other => write!(f, "is refused: {other:?}"),
        }
    }
}

/// A TLS failure as a sentence an operator can act on; the caller names the peer.
pub fn explain(e: &rustls::Error) -> String {
    use rustls::Error as E;
    match e {
        E::InvalidCertificate(CertificateError::Other(other)) => {
            match other.0.downcast_ref::<Refused>() {
                Some(refused) => refused.to_string(),
                None => format!("its certificate is refused: {other}"),
            }
        }
        E::InvalidCertificate(error) => Refused {
            subject: "?".into(),
            error: error.clone(),
            name: None,
        }
        .to_string(),
        E::General(text) => text.clone(),
        E::NoCertificatesPresented => "it sent no certificate and peer-verify(required-…) asks for one: give the client a certificate, or accept clients without one with peer-verify(optional-trusted)".into(),
        E::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateRequired
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::AccessDenied),
        ) => format!(
            "the peer refused sluice's certificate ({alert:?}): give the peer the CA that signed cert-file(), or give sluice a cert-file() when the peer requires one"
        ),
        E::AlertReceived(AlertDescription::HandshakeFailure | AlertDescription::ProtocolVersion) => {
            "the peer and sluice share no TLS version or cipher suite: compare ssl-options() and cipher-suite() on both sides".into()
        }
        E::AlertReceived(alert) => format!("the peer ended the handshake ({alert:?})"),
        E::PeerIncompatible(PeerIncompatible::NoCipherSuitesInCommon)
        | E::PeerIncompatible(PeerIncompatible::NoKxGroupsInCommon) => {
            "the peer and sluice share no cipher suite: compare cipher-suite() and ssl-options() on both sides".into()
        }
        E::PeerIncompatible(why) => format!("the peer's TLS is incompatible: {why:?}"),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } | E::InappropriateHandshakeMessage { .. } => {
            "the peer does not speak TLS here (plain syslog sent to a TLS port, or TLS to a plain one?)".into()
        }
        other => other.to_string(),
    }
}

/// [`explain`] for the I/O error a TLS stream returns; other I/O errors as they are.
pub fn explain_io(e: &std::io::Error) -> String {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => explain(tls),
        None => e.to_string(),
    }
}
