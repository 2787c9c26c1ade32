//! The keys of an archive.
//!
//! **Encryption.** Each segment of an archive has a random data key; it is wrapped for every
//! recipient — the public key of an X.509 certificate, RSA-OAEP with SHA-256 — so the server
//! that writes needs no secret that can decrypt. A recipient is known by [`KeyId`], the
//! SHA-256 of its modulus and exponent; a reader's private key finds its wrapped copy by it.
//!
//! **Forward-secure sealing.** `sluice logstore keygen` makes a *verification key* `S0`
//! (kept offline) and the server's *sealing key* file, which holds `S(j)` and `j`. Each new
//! segment takes `S(j)`, stores `S(j+1) = H(S(j))` in the file before it uses it (the old
//! value is overwritten, and erased from memory), and derives its first MAC key
//! `k0 = HMAC(S(j), segment id)`. Each frame of the segment is sealed with the next key,
//! `k(i+1) = H(k(i))`, and the key it used is erased. Whoever takes the server holds `S(j)`
//! and the current `k(i)` of open segments: neither gives an earlier key, so what was sealed
//! before cannot be sealed again. The verifier computes `S(j)` from `S0` by `j` hashes.

use ring::hmac;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey};
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use zeroize::Zeroize;

/// 32 bytes of key material.
pub type Secret = [u8; 32];

/// A recipient's key, as segments name it.
pub type KeyId = [u8; 32];

/// The way a data key is wrapped for a recipient.
pub const WRAP_RSA_OAEP_SHA256: u8 = 1;

fn sha256(parts: &[&[u8]]) -> Secret {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(p);
    }
    ctx.finish()
        .as_ref()
        .try_into()
        .expect("sha-256 is 32 bytes")
}

pub fn random<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let mut out = [0; N];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .expect("the system's random number generator");
    out
}

fn rsa_key_id(key: &RsaPublicKey) -> KeyId {
    sha256(&[&key.n().to_bytes_be(), b"/", &key.e().to_bytes_be()])
}

/// Someone archives are encrypted for: the public key of a certificate.
#[derive(Clone, Debug)]
pub struct Recipient {
    pub id: KeyId,
    key: RsaPublicKey,
    /// The certificate's subject and end of validity (seconds since the epoch).
    pub subject: String,
    pub not_after: i64,
}

impl Recipient {
    /// The recipients of the PEM certificates in `pem` (one file may hold several).
    pub fn from_pem(pem: &[u8]) -> Result<Vec<Recipient>, String> {
        let mut out = Vec::new();
        for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
            let block = block.map_err(|e| format!("not a PEM file: {e}"))?;
            if block.label != "CERTIFICATE" {
                continue;
            }
            let cert = block
                .parse_x509()
                .map_err(|e| format!("not an X.509 certificate: {e}"))?;
            let spki = cert.public_key().raw;
            let key = RsaPublicKey::from_public_key_der(spki).map_err(|_| {
                format!(
                    "the certificate of {} has no RSA public key (logstore encrypts for RSA keys)",
                    cert.subject()
                )
            })?;
            if key.size() < 256 {
                return Err(format!(
                    "the RSA key of {} has {} bits; logstore wants 2048 or more",
                    cert.subject(),
                    key.size() * 8
                ));
            }
            out.push(Recipient {
                id: rsa_key_id(&key),
                key,
                subject: cert.subject().to_string(),
                not_after: cert.validity().not_after.timestamp(),
            });
        }
        if out.is_empty() {
            return Err("no certificate in the file".into());
        }
        Ok(out)
    }

    /// `data_key` encrypted for this recipient.
    pub fn wrap(&self, data_key: &Secret) -> Vec<u8> {
        let mut rng = rsa::rand_core::OsRng;
        self.key
            .encrypt(&mut rng, Oaep::new::<sha2::Sha256>(), data_key)
            .expect("RSA-OAEP of 32 bytes under a key of 2048 bits or more")
    }
}

/// A recipient's private key, to read archives.
pub struct DecryptionKey {
    pub id: KeyId,
    key: RsaPrivateKey,
}

impl DecryptionKey {
    /// A PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`) or PKCS#1 (`BEGIN RSA PRIVATE KEY`).
    pub fn from_pem(pem: &[u8]) -> Result<DecryptionKey, String> {
        let text = std::str::from_utf8(pem).map_err(|_| "not a PEM file".to_string())?;
        let key = RsaPrivateKey::from_pkcs8_pem(text)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(text))
            .map_err(|_| {
                "not an unencrypted RSA private key in PEM (PKCS#8 or PKCS#1)".to_string()
            })?;
        Ok(DecryptionKey {
            id: rsa_key_id(&key.to_public_key()),
            key,
        })
    }

    pub fn unwrap(&self, wrapped: &[u8]) -> Result<Secret, String> {
        let mut key = self
            .key
            .decrypt(Oaep::new::<sha2::Sha256>(), wrapped)
            .map_err(|_| "the wrapped data key does not decrypt with this key".to_string())?;
        let out = Secret::try_from(&key[..]).map_err(|_| "a wrapped data key of a wrong length");
        key.zeroize();
        Ok(out?)
    }
}

/// The first MAC key of segment `id`, from the sealing key's `S(j)`.
pub fn segment_key(s: &Secret, id: &[u8]) -> Secret {
    let key = hmac::Key::new(hmac::HMAC_SHA256, s);
    let tag = hmac::sign(&key, &[b"sluice-logstore segment ", id].concat());
    tag.as_ref().try_into().expect("hmac-sha256 is 32 bytes")
}

/// The MAC key after `k`.
pub fn evolve(k: &Secret) -> Secret {
    sha256(&[b"sluice-logstore evolve ", k])
}

/// The sealing key after `s`.
fn advance(s: &Secret) -> Secret {
    sha256(&[b"sluice-logstore advance ", s])
}

/// The seal of chain head `h` under MAC key `k`.
pub fn seal(k: &Secret, h: &Secret) -> Secret {
    let key = hmac::Key::new(hmac::HMAC_SHA256, k);
    hmac::sign(&key, h)
        .as_ref()
        .try_into()
        .expect("hmac-sha256 is 32 bytes")
}

/// Whether `tag` is the seal of `h` under `k`, in constant time.
pub fn seal_holds(k: &Secret, h: &Secret, tag: &Secret) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, k);
    hmac::verify(&key, h, tag).is_ok()
}

/// The name of a sealing key: the first 8 bytes of a hash of `S0`.
pub type SealId = [u8; 8];

fn seal_id(s0: &Secret) -> SealId {
    sha256(&[b"sluice-logstore id ", s0])[..8]
        .try_into()
        .expect("8 bytes")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N {
        return None;
    }
    let mut out = [0; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

const VERIFY_HEADER: &str = "sluice-logstore verification key 1";
const SEAL_HEADER: &str = "sluice-logstore sealing key 1";

/// The verification key: `S0`, kept away from the server.
pub struct VerifyKey {
    pub id: SealId,
    s0: Secret,
    /// The last `S(j)` computed, to go on from.
    last: Mutex<(u64, Secret)>,
}

impl VerifyKey {
    pub fn read(path: &Path) -> Result<VerifyKey, String> {
        let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut lines = text.lines();
        let s0 = (lines.next() == Some(VERIFY_HEADER))
            .then(|| lines.next().and_then(|l| unhex::<32>(l.trim())))
            .flatten()
            .ok_or_else(|| format!("{}: not a logstore verification key", path.display()))?;
        Ok(VerifyKey {
            id: seal_id(&s0),
            s0,
            last: Mutex::new((0, s0)),
        })
    }

    /// The first MAC key of the segment `id` sealed with `S(j)`.
    pub fn segment_key(&self, j: u64, id: &[u8]) -> Secret {
        let mut last = self.last.lock().expect("verification key lock");
        if last.0 > j {
            *last = (0, self.s0);
        }
        while last.0 < j {
            last.1 = advance(&last.1);
            last.0 += 1;
        }
        segment_key(&last.1, id)
    }
}

impl Drop for VerifyKey {
    fn drop(&mut self) {
        self.s0.zeroize();
        if let Ok(last) = self.last.get_mut() {
            last.1.zeroize();
        }
    }
}

/// The server's sealing key: `S(j)` in its file, advanced for every segment.
pub struct SealKey {
    pub path: PathBuf,
    pub id: SealId,
    state: Mutex<(u64, Secret)>,
}

/// The sealing keys in use, by their file's canonical path: every destination that names one
/// file (two in a configuration, or the old and the new one across a reload) advances one
/// key, under one lock — two keys read from one file would each write it (the second
/// one's rename finding its temporary file taken by the first) and hand out an index twice.
static SHARED: Mutex<Vec<(PathBuf, std::sync::Weak<SealKey>)>> = Mutex::new(Vec::new());

impl SealKey {
    /// The sealing key in `path`: the one already in use for that file, else read.
    pub fn shared(path: &Path) -> Result<Arc<SealKey>, String> {
        let canonical = fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut shared = SHARED.lock().expect("sealing keys lock");
        shared.retain(|(_, key)| key.strong_count() > 0);
        if let Some(key) = shared
            .iter()
            .find(|(p, _)| *p == canonical)
            .and_then(|(_, key)| key.upgrade())
        {
            return Ok(key);
        }
        let key = Arc::new(SealKey::read(path)?);
        shared.push((canonical, Arc::downgrade(&key)));
        Ok(key)
    }

    pub fn read(path: &Path) -> Result<SealKey, String> {
        let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let bad = || format!("{}: not a logstore sealing key", path.display());
        let mut lines = text.lines();
        if lines.next() != Some(SEAL_HEADER) {
            return Err(bad());
        }
        let mut field = |name: &str| {
            lines
                .next()
                .and_then(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .ok_or_else(bad)
        };
        let id = unhex::<8>(&field("id ")?).ok_or_else(bad)?;
        let j = field("index ")?.parse::<u64>().map_err(|_| bad())?;
        let s = unhex::<32>(&field("key ")?).ok_or_else(bad)?;
        Ok(SealKey {
            path: path.to_path_buf(),
            id,
            state: Mutex::new((j, s)),
        })
    }

    /// Makes a verification key at `verify` and the sealing key at `seal`; neither may exist.
    pub fn generate(seal: &Path, verify: &Path) -> Result<SealId, String> {
        let mut s0: Secret = random();
        let id = seal_id(&s0);
        let verify_text = format!("{VERIFY_HEADER}\n{}\n", hex(&s0));
        write_new(verify, verify_text.as_bytes())?;
        let result = write_new(seal, seal_text(&id, 0, &s0).as_bytes());
        s0.zeroize();
        result.map(|()| id)
    }

    /// Takes the next sealing index for a new segment: `S(j+1)` is in the file (synced)
    /// before `S(j)` is used. Returns `j` and the segment's first MAC key.
    pub fn next_segment(&self, segment: &[u8]) -> Result<(u64, Secret), String> {
        let mut state = self.state.lock().expect("sealing key lock");
        let (j, s) = *state;
        let mut next = advance(&s);
        let tmp = self.path.with_extension("next");
        let text = seal_text(&self.id, j + 1, &next);
        let written = (|| -> std::io::Result<()> {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode_0600()
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent() {
                fs::File::open(if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                })?
                .sync_all()?;
            }
            Ok(())
        })();
        if let Err(e) = written {
            next.zeroize();
            return Err(format!(
                "cannot advance the sealing key {}: {e}",
                self.path.display()
            ));
        }
        let k0 = segment_key(&s, segment);
        state.1.zeroize();
        *state = (j + 1, next);
        next.zeroize();
        Ok((j, k0))
    }
}

impl Drop for SealKey {
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            state.1.zeroize();
        }
    }
}

fn seal_text(id: &SealId, j: u64, s: &Secret) -> String {
    format!("{SEAL_HEADER}\nid {}\nindex {j}\nkey {}\n", hex(id), hex(s))
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode_0600()
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two destinations naming one sealing key file (or the old and new one of a reload)
    /// advance one key: every index is handed out once, and the file is never raced for.
    #[test]
    fn one_file_is_one_key_however_many_use_it() {
        let dir = tempfile::tempdir().unwrap();
        let (seal, verify) = (dir.path().join("seal"), dir.path().join("verify"));
        SealKey::generate(&seal, &verify).unwrap();
        let a = SealKey::shared(&seal).unwrap();
        let b = SealKey::shared(&dir.path().join(".").join("seal")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let taken: Vec<u64> = std::thread::scope(|s| {
            let one = s.spawn(|| {
                (0..50)
                    .map(|_| a.next_segment(b"x").unwrap().0)
                    .collect::<Vec<u64>>()
            });
            let two = s.spawn(|| {
                (0..50)
                    .map(|_| b.next_segment(b"y").unwrap().0)
                    .collect::<Vec<u64>>()
            });
            let mut all: Vec<u64> = one.join().unwrap();
            all.extend(two.join().unwrap());
            all
        });
        let mut sorted = taken.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<u64>>());
        drop((a, b));
        // None left: the next use reads the file, which holds the next index.
        assert_eq!(SealKey::shared(&seal).unwrap().state.lock().unwrap().0, 100);
    }

    #[test]
    fn the_verifier_derives_every_segment_key_the_server_used() {
        let dir = tempfile::tempdir().unwrap();
        let (seal, verify) = (dir.path().join("seal"), dir.path().join("verify"));
        let id = SealKey::generate(&seal, &verify).unwrap();
        assert!(
            SealKey::generate(&seal, &verify).is_err(),
            "never overwritten"
        );
        let server = SealKey::read(&seal).unwrap();
        assert_eq!(server.id, id);
        let used: Vec<(u64, Secret)> = (0..5).map(|n| server.next_segment(&[n]).unwrap()).collect();
        // Read again: the file holds the next index.
        assert_eq!(SealKey::read(&seal).unwrap().state.lock().unwrap().0, 5);
        let verifier = VerifyKey::read(&verify).unwrap();
        assert_eq!(verifier.id, id);
        for (n, (j, k0)) in used.iter().enumerate().rev() {
            assert_eq!(*j, n as u64);
            assert_eq!(verifier.segment_key(*j, &[n as u8]), *k0);
        }
        let text = fs::read_to_string(&seal).unwrap();
        for (_, k0) in &used {
            assert!(!text.contains(&hex(k0)));
        }
    }
}
