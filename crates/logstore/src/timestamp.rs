//! RFC 3161 timestamps over an archive's chain head: a timestamping authority (TSA) signs
//! that the head existed at a time, and since the head hashes every frame before it, the
//! token proves when all of them existed — even to someone who trusts neither the server
//! nor its clock.
//!
//! The message imprint is the chain head itself (a SHA-256 value), so `openssl ts -verify
//! -digest HEAD` checks a token too. Writing asks for a token ([`request`], [`token_of`]);
//! reading checks one ([`verify`]): the TSA's signature over its signed attributes, the
//! digest of the TSTInfo they name, the imprint, and with trust anchors ([`Trust`]) the
//! signer's certificate chain, its validity at the stamped time and its timeStamping use.

use crate::keys::Secret;
use cms::cert::CertificateChoices;
use cms::content_info::ContentInfo;
use cms::signed_data::{SignedData, SignerIdentifier};
use der::asn1::{AnyRef, IntRef, ObjectIdentifier, OctetString, UintRef};
use der::{Decode, Encode, Reader, SliceReader, Tag, Tagged};
use spki::AlgorithmIdentifierOwned;
use x509_parser::prelude::{FromDer, X509Certificate};

const SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
const SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.2");
const SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.3");
const SIGNED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.2");
const TST_INFO: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.16.1.4");
const CONTENT_TYPE: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.3");
const MESSAGE_DIGEST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.4");
const RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const RSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const RSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const RSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");
const ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

#[derive(der::Sequence)]
struct MessageImprint {
    hash_algorithm: AlgorithmIdentifierOwned,
    hashed_message: OctetString,
}

#[derive(der::Sequence)]
struct TimeStampReq<'a> {
    version: u8,
    message_imprint: MessageImprint,
    #[asn1(optional = "true")]
    req_policy: Option<ObjectIdentifier>,
    #[asn1(optional = "true")]
    nonce: Option<UintRef<'a>>,
    cert_req: bool,
}

/// A policy OID as `timestamp-policy()` gives it, checked.
pub fn policy(text: &str) -> Result<ObjectIdentifier, String> {
    ObjectIdentifier::new(text).map_err(|_| format!("{text}: not an OID (such as 1.2.3.4.1)"))
}

/// The DER request for a token over `head`, asking the TSA to include its certificate.
pub fn request(head: &Secret, policy: Option<ObjectIdentifier>, nonce: u64) -> Vec<u8> {
    let nonce = nonce.to_be_bytes();
    let start = nonce.iter().position(|&b| b != 0).unwrap_or(7);
    TimeStampReq {
        version: 1,
        message_imprint: MessageImprint {
            hash_algorithm: AlgorithmIdentifierOwned {
                oid: SHA256,
                parameters: None,
            },
            hashed_message: OctetString::new(head.to_vec()).expect("32 bytes"),
        },
        req_policy: policy,
        nonce: Some(UintRef::new(&nonce[start..]).expect("a nonce")),
        cert_req: true,
    }
    .to_der()
    .expect("a timestamp request encodes")
}

/// The token in a TSA's DER response: granted, over `head`, with `nonce`.
pub fn token_of(response: &[u8], head: &Secret, nonce: u64) -> Result<Vec<u8>, String> {
    let bad = |e: der::Error| format!("not a timestamp response: {e}");
    let mut r = SliceReader::new(response).map_err(bad)?;
    let (status, token) = r
        .sequence(|r| {
            let status = r.sequence(|r| {
                let status: u8 = r.decode()?;
                let mut said = String::new();
                while !r.is_finished() {
                    let any: AnyRef = r.decode()?;
                    if any.tag() == Tag::Sequence {
                        // PKIFreeText: the TSA's reasons.
                        let mut inner = SliceReader::new(any.value())?;
                        while !inner.is_finished() {
                            let text: AnyRef = inner.decode()?;
                            said.push_str(&String::from_utf8_lossy(text.value()));
                        }
                    }
                }
                Ok::<_, der::Error>((status, said))
            })?;
            let token = if r.is_finished() {
                None
            } else {
                Some(r.tlv_bytes()?.to_vec())
            };
            Ok::<_, der::Error>((status, token))
        })
        .map_err(bad)?;
    let (status, said) = status;
    // 0 granted, 1 granted with modifications; 2 rejection, 3 waiting, 4-5 revocation.
    let token = match (status, token) {
        (0 | 1, Some(token)) => token,
        _ => {
            return Err(format!(
                "the authority refused (status {status}{})",
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            ))
        }
    };
    let info = tst_info(&signed_data(&token)?)?;
    if info.imprint != head[..] {
        return Err("the token is over another value than the chain head asked for".into());
    }
    if info.nonce.as_deref() != Some(strip_zeros(&nonce.to_be_bytes())) {
        return Err("the token does not carry the nonce of the request".into());
    }
    Ok(token)
}

fn strip_zeros(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|&x| x != 0)
        .unwrap_or(b.len().saturating_sub(1));
    &b[start..]
}

/// What a checked token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// The time the authority put on it, in microseconds since the epoch.
    pub time: i64,
    /// The subject of the certificate that signed it.
    pub tsa: String,
    /// Whether that certificate chains to a trust anchor the reader gave.
    pub trusted: bool,
}

/// The certificates a reader trusts to sign timestamps: the authorities' own or their CAs'.
pub struct Trust {
    certs: Vec<Vec<u8>>,
}

impl Trust {
    /// The certificates of a PEM file.
    pub fn from_pem(pem: &[u8]) -> Result<Trust, String> {
        let mut certs = Vec::new();
        for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
            let block = block.map_err(|e| format!("not a PEM file: {e}"))?;
            if block.label == "CERTIFICATE" {
                block
                    .parse_x509()
                    .map_err(|e| format!("not an X.509 certificate: {e}"))?;
                certs.push(block.contents);
            }
        }
        if certs.is_empty() {
            return Err("no certificate in the file".into());
        }
        Ok(Trust { certs })
    }
}

/// The SignedData of a token.
fn signed_data(token: &[u8]) -> Result<SignedData, String> {
    let info = ContentInfo::from_der(token).map_err(|e| format!("not a timestamp token: {e}"))?;
    if info.content_type != SIGNED_DATA {
        return Err("not a timestamp token: no signed data".into());
    }
    info.content
        .decode_as::<SignedData>()
        .map_err(|e| format!("not a timestamp token: {e}"))
}

struct TstInfo {
    imprint: Vec<u8>,
    time: i64,
    nonce: Option<Vec<u8>>,
    /// The DER of the TSTInfo, as the signature's message digest covers it.
    der: Vec<u8>,
}

/// The TSTInfo a SignedData carries.
fn tst_info(sd: &SignedData) -> Result<TstInfo, String> {
    let bad = |e: der::Error| format!("the token's TSTInfo: {e}");
    if sd.encap_content_info.econtent_type != TST_INFO {
        return Err("the token holds no TSTInfo".into());
    }
    let content = sd
        .encap_content_info
        .econtent
        .as_ref()
        .ok_or("the token holds no TSTInfo")?;
    let der = content
        .decode_as::<OctetString>()
        .map_err(bad)?
        .as_bytes()
        .to_vec();
    let mut r = SliceReader::new(&der).map_err(bad)?;
    let (imprint, time, nonce) = r
        .sequence(|r| {
            let _version: u8 = r.decode()?;
            let _policy: ObjectIdentifier = r.decode()?;
            let imprint: MessageImprint = r.decode()?;
            let _serial: IntRef = r.decode()?;
            let time: AnyRef = r.decode()?;
            time.tag().assert_eq(Tag::GeneralizedTime)?;
            let mut nonce = None;
            while !r.is_finished() {
                let any: AnyRef = r.decode()?;
                if any.tag() == Tag::Integer {
                    nonce = Some(strip_zeros(any.value()).to_vec());
                }
            }
            Ok::<_, der::Error>((imprint, time.value().to_vec(), nonce))
        })
        .map_err(bad)?;
    if imprint.hash_algorithm.oid != SHA256 {
        return Err("the token's imprint is not a SHA-256 value".into());
    }
    let time = generalized_time(&time).ok_or("the token's time does not read")?;
    Ok(TstInfo {
        imprint: imprint.hashed_message.as_bytes().to_vec(),
        time,
        nonce,
        der,
    })
}

/// `YYYYMMDDHHMMSS[.f…]Z` in microseconds since the epoch.
fn generalized_time(t: &[u8]) -> Option<i64> {
    let t = std::str::from_utf8(t).ok()?.strip_suffix('Z')?;
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    if whole.len() != 14 || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |a: usize, b: usize| whole[a..b].parse::<i64>().ok();
    let (y, m, d) = (n(0, 4)?, n(4, 6)?, n(6, 8)?);
    let (hh, mm, ss) = (n(8, 10)?, n(10, 12)?, n(12, 14)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days since the epoch of a civil date (Howard Hinnant's algorithm).
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let mut micros = 0i64;
    for (i, c) in frac.bytes().take(6).enumerate() {
        micros += i64::from(c.checked_sub(b'0').filter(|&v| v < 10)?) * 10i64.pow(5 - i as u32);
    }
    Some(((days * 86_400) + hh * 3600 + mm * 60 + ss) * 1_000_000 + micros)
}

fn digest(alg: &ObjectIdentifier, data: &[u8]) -> Option<Vec<u8>> {
    let alg = match *alg {
        SHA256 => &ring::digest::SHA256,
        SHA384 => &ring::digest::SHA384,
        SHA512 => &ring::digest::SHA512,
        _ => return None,
    };
    Some(ring::digest::digest(alg, data).as_ref().to_vec())
}

/// The ring algorithm that checks a signature of `sig` over a `dig` digest.
fn algorithm(
    dig: &ObjectIdentifier,
    sig: &ObjectIdentifier,
) -> Option<&'static dyn ring::signature::VerificationAlgorithm> {
    use ring::signature as s;
    Some(match (*sig, *dig) {
        (RSA | RSA_SHA256, SHA256) => &s::RSA_PKCS1_2048_8192_SHA256,
        (RSA | RSA_SHA384, SHA384) => &s::RSA_PKCS1_2048_8192_SHA384,
        (RSA | RSA_SHA512, SHA512) => &s::RSA_PKCS1_2048_8192_SHA512,
        (ECDSA_SHA256, _) => &s::ECDSA_P256_SHA256_ASN1,
        (ECDSA_SHA384, _) => &s::ECDSA_P384_SHA384_ASN1,
        (ED25519, _) => &s::ED25519,
        _ => return None,
    })
}

/// Checks that `token` is an authority's signature over `head`, and with `trust` that the
/// signer is one the reader trusts.
pub fn verify(token: &[u8], head: &Secret, trust: Option<&Trust>) -> Result<Stamp, String> {
    let sd = signed_data(token)?;
    let info = tst_info(&sd)?;
    if info.imprint != head[..] {
        return Err("the token is over another value than this chain head".into());
    }
    let certs: Vec<Vec<u8>> = sd
        .certificates
        .iter()
        .flat_map(|set| set.0.iter())
        .filter_map(|c| match c {
            CertificateChoices::Certificate(c) => c.to_der().ok(),
            CertificateChoices::Other(_) => None,
        })
        .collect();
    let signer_info = sd
        .signer_infos
        .0
        .iter()
        .next()
        .ok_or("the token has no signer")?;
    // The signer's certificate: in the token, or among the trusted ones.
    let candidates = certs
        .iter()
        .chain(trust.map(|t| t.certs.iter()).into_iter().flatten());
    let mut signer = None;
    for der in candidates {
        let Ok((_, cert)) = X509Certificate::from_der(der) else {
            continue;
        };
        let matches = match &signer_info.sid {
            SignerIdentifier::IssuerAndSerialNumber(ias) => {
                ias.issuer.to_der().ok().as_deref() == Some(cert.issuer().as_raw())
                    && strip_zeros(ias.serial_number.as_bytes()) == strip_zeros(cert.raw_serial())
            }
            SignerIdentifier::SubjectKeyIdentifier(ski) => cert
                .extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0),
                    _ => None,
                })
                .is_some_and(|k| k == ski.0.as_bytes()),
        };
        if matches {
            signer = Some(der.clone());
            break;
        }
    }
    let signer_der = signer.ok_or("the token names a signer whose certificate is not at hand")?;
    let (_, signer) = X509Certificate::from_der(&signer_der)
        .map_err(|e| format!("the signer's certificate: {e}"))?;
    // The signed attributes: the content is a TSTInfo, and its digest is the one signed.
    let attrs = signer_info
        .signed_attrs
        .as_ref()
        .ok_or("the token's signature has no signed attributes")?;
    let value_of = |oid: ObjectIdentifier| {
        attrs
            .iter()
            .find(|a| a.oid == oid)
            .and_then(|a| a.values.iter().next())
    };
    let content_type = value_of(CONTENT_TYPE)
        .and_then(|v| v.decode_as::<ObjectIdentifier>().ok())
        .ok_or("the token's signature names no content type")?;
    if content_type != TST_INFO {
        return Err("the token's signature is over another content type".into());
    }
    let dig = &signer_info.digest_alg.oid;
    let want = digest(dig, &info.der).ok_or("the token's digest algorithm is not supported")?;
    let signed_digest = value_of(MESSAGE_DIGEST)
        .and_then(|v| v.decode_as::<OctetString>().ok())
        .ok_or("the token's signature names no message digest")?;
    if signed_digest.as_bytes() != want {
        return Err("the token's TSTInfo was altered: its digest is not the signed one".into());
    }
    let alg = algorithm(dig, &signer_info.signature_algorithm.oid)
        .ok_or("the token's signature algorithm is not supported")?;
    let message = attrs.to_der().map_err(|e| e.to_string())?;
    let key = &signer.public_key().subject_public_key.data;
    ring::signature::UnparsedPublicKey::new(alg, key)
        .verify(&message, signer_info.signature.as_bytes())
        .map_err(|_| "the token's signature does not hold".to_string())?;
    let tsa = signer.subject().to_string();
    let Some(trust) = trust else {
        return Ok(Stamp {
            time: info.time,
            tsa,
            trusted: false,
        });
    };
    // The signer: for time stamping, valid when it stamped, and one of the trusted
    // certificates or issued (through the token's certificates) by one.
    let stamping = signer
        .extended_key_usage()
        .ok()
        .flatten()
        .is_some_and(|eku| eku.value.time_stamping);
    if !stamping {
        return Err(format!("{tsa} is not a certificate for time stamping"));
    }
    let secs = info.time.div_euclid(1_000_000);
    let validity = signer.validity();
    if secs < validity.not_before.timestamp() || secs > validity.not_after.timestamp() {
        return Err(format!("{tsa} was not valid at the stamped time"));
    }
    let mut current = signer_der;
    for _ in 0..8 {
        if trust.certs.contains(&current) {
            return Ok(Stamp {
                time: info.time,
                tsa,
                trusted: true,
            });
        }
        let (_, cert) = X509Certificate::from_der(&current).map_err(|e| e.to_string())?;
        let issued_by = |der: &Vec<u8>| {
            X509Certificate::from_der(der).ok().is_some_and(|(_, ca)| {
                ca.subject().as_raw() == cert.issuer().as_raw()
                    && cert.verify_signature(Some(ca.public_key())).is_ok()
            })
        };
        if trust.certs.iter().any(issued_by) {
            return Ok(Stamp {
                time: info.time,
                tsa,
                trusted: true,
            });
        }
        match certs.iter().find(|c| **c != current && issued_by(c)) {
            Some(up) => current = up.clone(),
            None => break,
        }
    }
    Err(format!(
        "{tsa} is not trusted: no certificate given with --tsa-ca issued it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl ts -reply` (a CA and a TSA certificate it issued, timeStamping only) to a
    /// query over 32 bytes of 7 with nonce 0x3D5440A8976203E3.
    const RESPONSE: &[u8] = include_bytes!("../testdata/tsa-response.der");
    const NONCE: u64 = 0x3D54_40A8_9762_03E3;
    const CA: &[u8] = include_bytes!("../testdata/tsa-ca.pem");
    const OTHER: &[u8] = include_bytes!("../testdata/reader.pem");

    #[test]
    fn an_authoritys_token_is_checked_against_the_head_its_signature_and_trust() {
        let head = [7u8; 32];
        assert!(token_of(RESPONSE, &[8; 32], NONCE).is_err(), "another head");
        assert!(
            token_of(RESPONSE, &head, NONCE + 1).is_err(),
            "another nonce"
        );
        assert!(token_of(&RESPONSE[..100], &head, NONCE).is_err());
        let token = token_of(RESPONSE, &head, NONCE).unwrap();
        let ca = Trust::from_pem(CA).unwrap();
        let stamp = verify(&token, &head, Some(&ca)).unwrap();
        assert!(stamp.trusted);
        assert_eq!(stamp.tsa, "CN=sluice test TSA");
        assert!(stamp.time > 1_790_000_000_000_000, "{}", stamp.time);
        let untrusted = verify(&token, &head, None).unwrap();
        assert_eq!((untrusted.time, untrusted.trusted), (stamp.time, false));
        let other = Trust::from_pem(OTHER).unwrap();
        let e = verify(&token, &head, Some(&other)).unwrap_err();
        assert!(e.contains("not trusted"), "{e}");
        assert!(verify(&token, &[8; 32], Some(&ca)).is_err());
        // Every byte altered: the token no longer checks, or checks as the same stamp (bytes
        // that nothing checked reads: the copy of the CA's certificate the token carries,
        // where the reader uses its own).
        let mut failed = 0;
        for i in 0..token.len() {
            let mut t = token.clone();
            t[i] ^= 0x01;
            match verify(&t, &head, Some(&ca)) {
                Err(_) => failed += 1,
                Ok(s) => assert_eq!(s, stamp, "byte {i}"),
            }
        }
        assert!(failed > token.len() * 6 / 10, "{failed} of {}", token.len());
    }

    #[test]
    fn generalized_times_read_with_and_without_fractions() {
        assert_eq!(generalized_time(b"19700101000000Z"), Some(0));
        assert_eq!(
            generalized_time(b"20261126183005.25Z"),
            Some(1_795_717_805_250_000)
        );
        assert_eq!(generalized_time(b"20261126183005"), None);
        assert_eq!(generalized_time(b"20261326183005Z"), None);
    }

    #[test]
    fn a_request_asks_for_the_head_with_a_nonce_and_the_certificate() {
        let head = [7u8; 32];
        let req = request(&head, Some(policy("1.2.3.4.1").unwrap()), 0x01_02);
        let mut r = SliceReader::new(&req).unwrap();
        r.sequence(|r| {
            assert_eq!(r.decode::<u8>()?, 1);
            let imprint: MessageImprint = r.decode()?;
            assert_eq!(imprint.hashed_message.as_bytes(), head);
            assert_eq!(r.decode::<ObjectIdentifier>()?.to_string(), "1.2.3.4.1");
            assert_eq!(r.decode::<UintRef>()?.as_bytes(), [1, 2]);
            assert!(r.decode::<bool>()?);
            Ok::<_, der::Error>(())
        })
        .unwrap();
        assert!(policy("not an oid").is_err());
    }
}
