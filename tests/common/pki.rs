//! Certificates for the TLS tests, made with the `openssl` command (installed by
//! `.ci/install-test-deps.sh`): a CA, a server certificate for `localhost`/127.0.0.1, two
//! client certificates it signed, and a client certificate of another CA.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Pki {
    pub dir: tempfile::TempDir,
}

/// A certificate and its key.
pub struct Identity {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    /// Makes every certificate the tests use, in a directory of its own.
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().expect("temporary directory");
        let d = dir.path();
        ca(d, "ca", "/CN=sluice test CA/O=Sluice Tests");
        ca(d, "rogue-ca", "/CN=rogue CA/O=Elsewhere");
        leaf(
            d,
            "server",
            "ca",
            "/CN=localhost/O=Sluice Tests",
            "serverAuth",
        );
        leaf(
            d,
            "client",
            "ca",
            "/C=HU/O=Example Inc/OU=Logging/CN=client1",
            "clientAuth",
        );
        leaf(
            d,
            "other-client",
            "ca",
            "/C=DE/O=Other Org/OU=Ops/CN=client2",
            "clientAuth",
        );
        leaf(
            d,
            "rogue",
            "rogue-ca",
            "/O=Elsewhere/CN=rogue",
            "clientAuth",
        );
        Pki { dir }
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn identity(&self, name: &str) -> Identity {
        Identity {
            cert: self.dir.path().join(format!("{name}.pem")),
            key: self.dir.path().join(format!("{name}.key")),
        }
    }

    /// `trusted-keys()`'s form of a certificate's SHA-1 fingerprint: `SHA1:AB:CD:…`.
    pub fn fingerprint(&self, name: &str) -> String {
        let out = openssl(
            self.dir.path(),
            &[
                "x509",
                "-noout",
                "-fingerprint",
                "-sha1",
                "-in",
                &format!("{name}.pem"),
            ],
        );
        let text = String::from_utf8(out).expect("utf-8");
        let hex = text.trim().rsplit('=').next().expect("a fingerprint");
        format!("SHA1:{hex}")
    }

    /// `name`'s key, certificate and the CA certificate in a PKCS#12 file without a password,
    /// as syslog-ng's `pkcs12-file()` reads it.
    pub fn pkcs12(&self, name: &str) -> PathBuf {
        let out = format!("{name}.p12");
        openssl(
            self.dir.path(),
            &[
                "pkcs12",
                "-export",
                "-in",
                &format!("{name}.pem"),
                "-inkey",
                &format!("{name}.key"),
                "-certfile",
                "ca.pem",
                "-out",
                &out,
                "-passout",
                "pass:",
            ],
        );
        self.dir.path().join(out)
    }

    /// A self-signed certificate as most people make one to try TLS: `openssl req -x509`
    /// with its defaults (RSA, `basicConstraints=CA:TRUE`), for `subject`.
    pub fn self_signed(&self, name: &str, subject: &str) -> Identity {
        self_signed(self.dir.path(), name, subject, &["rsa:2048"], &[]);
        self.identity(name)
    }

    /// An X.509 v1 certificate (`openssl x509 -req` without extensions) the test CA signed.
    pub fn v1_leaf(&self, name: &str, subject: &str) -> Identity {
        let d = self.dir.path();
        request(d, name, subject, &["rsa:2048"]);
        sign(d, name, "ca", 3650, &[]);
        self.identity(name)
    }

    /// A timestamping authority's certificate the CA signed (`extendedKeyUsage` critical,
    /// `timeStamping` only, as RFC 3161 wants): `tsa.pem`, `tsa.key`.
    pub fn timestamping(&self) -> Identity {
        leaf(
            self.dir.path(),
            "tsa",
            "ca",
            "/CN=sluice test TSA/O=Sluice Tests",
            "critical,timeStamping",
        );
        self.identity("tsa")
    }

    /// A server certificate for localhost and 127.0.0.1 the CA signed, for `subject`, valid
    /// for `days`: `name.pem`, `name.key`.
    pub fn server(&self, name: &str, subject: &str, days: u32) -> Identity {
        leaf_for(self.dir.path(), name, "ca", subject, "serverAuth", days);
        self.identity(name)
    }

    /// A `tls()` block with this CA, and `name`'s certificate and key.
    pub fn tls(&self, name: &str, extra: &str) -> String {
        let id = self.identity(name);
        format!(
            r#"tls(ca-file("{}") cert-file("{}") key-file("{}") {extra})"#,
            self.ca().display(),
            id.cert.display(),
            id.key.display()
        )
    }
}

fn openssl(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (run .ci/install-test-deps.sh)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn ca(dir: &Path, name: &str, subject: &str) {
    self_signed(
        dir,
        name,
        subject,
        &["ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        &[
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// A new key (`-newkey` and its `key` arguments) and a certificate for `subject` signed with
/// it, with `extra` arguments (extensions): `name.key`, `name.pem`.
fn self_signed(dir: &Path, name: &str, subject: &str, key: &[&str], extra: &[&str]) {
    let (keyout, out) = (format!("{name}.key"), format!("{name}.pem"));
    let mut args = vec!["req", "-x509", "-newkey"];
    args.extend_from_slice(key);
    args.extend_from_slice(&[
        "-nodes", "-keyout", &keyout, "-out", &out, "-days", "3650", "-subj", subject,
    ]);
    args.extend_from_slice(extra);
    openssl(dir, &args);
}

fn leaf(dir: &Path, name: &str, ca: &str, subject: &str, usage: &str) {
    leaf_for(dir, name, ca, subject, usage, 3650);
}

fn leaf_for(dir: &Path, name: &str, ca: &str, subject: &str, usage: &str, days: u32) {
    request(
        dir,
        name,
        subject,
        &["ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
    );
    let ext = dir.join(format!("{name}.ext"));
    // A timestamping authority's key signs and does nothing else (openssl ts checks it).
    let key_usage = if usage.contains("timeStamping") {
        "digitalSignature"
    } else {
        "digitalSignature,keyEncipherment"
    };
    std::fs::write(
        &ext,
        format!(
            "basicConstraints=CA:FALSE\nkeyUsage={key_usage}\nextendedKeyUsage={usage}\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
        ),
    )
    .expect("write the extensions");
    sign(dir, name, ca, days, &["-extfile", &format!("{name}.ext")]);
}

/// A new key (`-newkey` and its `key` arguments) and a request for `subject`: `name.key`,
/// `name.csr`.
fn request(dir: &Path, name: &str, subject: &str, key: &[&str]) {
    let (keyout, out) = (format!("{name}.key"), format!("{name}.csr"));
    let mut args = vec!["req", "-newkey"];
    args.extend_from_slice(key);
    args.extend_from_slice(&["-nodes", "-keyout", &keyout, "-out", &out, "-subj", subject]);
    openssl(dir, &args);
}

/// `name.csr` signed by `ca` into `name.pem`, valid for `days`, with `extra` arguments
/// (extensions).
fn sign(dir: &Path, name: &str, ca: &str, days: u32, extra: &[&str]) {
    let days = days.to_string();
    let (csr, ca_cert, ca_key, out) = (
        format!("{name}.csr"),
        format!("{ca}.pem"),
        format!("{ca}.key"),
        format!("{name}.pem"),
    );
    let mut args = vec![
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_cert,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &out,
        "-days",
        &days,
    ];
    args.extend_from_slice(extra);
    openssl(dir, &args);
}
