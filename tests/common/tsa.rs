//! A timestamping authority for the tests: `openssl ts -reply` (RFC 3161) behind a small
//! HTTP server on loopback, with a certificate of the test CA ([`super::pki`]). It can be
//! taken down and brought back to test a failing authority.

use super::pki::Pki;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

pub struct Authority {
    pub pki: Pki,
    pub port: u16,
    /// Tokens given.
    pub served: Arc<AtomicUsize>,
    /// Whether it answers (503 when not).
    pub up: Arc<AtomicBool>,
}

impl Authority {
    pub fn start() -> Authority {
        let pki = Pki::new();
        pki.timestamping();
        let dir = pki.dir.path().to_path_buf();
        std::fs::write(dir.join("tsaserial"), "01\n").unwrap();
        std::fs::write(
            dir.join("tsa.cnf"),
            format!(
                "[ tsa ]\ndefault_tsa = tsa1\n[ tsa1 ]\ndir = {}\nserial = $dir/tsaserial\n\
                 crypto_device = builtin\nsigner_cert = $dir/tsa.pem\ncerts = $dir/ca.pem\n\
                 signer_key = $dir/tsa.key\nsigner_digest = sha256\ndefault_policy = 1.2.3.4.1\n\
                 other_policies = 1.2.3.4.5\ndigests = sha256\naccuracy = secs:1\n\
                 ordering = yes\ntsa_name = yes\ness_cert_id_alg = sha256\n",
                dir.display()
            ),
        )
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = Arc::new(AtomicUsize::new(0));
        let up = Arc::new(AtomicBool::new(true));
        let (s, u) = (served.clone(), up.clone());
        std::thread::spawn(move || {
            for (n, conn) in listener.incoming().enumerate() {
                let Ok(mut conn) = conn else { continue };
                let query = match read_request(&mut conn) {
                    Some(q) => q,
                    None => continue,
                };
                if !u.load(Ordering::SeqCst) {
                    let _ = conn.write_all(
                        b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
                    );
                    continue;
                }
                let (q, r) = (dir.join(format!("q{n}.tsq")), dir.join(format!("r{n}.tsr")));
                std::fs::write(&q, &query).unwrap();
                let out = Command::new("openssl")
                    .args(["ts", "-reply", "-config"])
                    .arg(dir.join("tsa.cnf"))
                    .arg("-queryfile")
                    .arg(&q)
                    .arg("-out")
                    .arg(&r)
                    .output()
                    .expect("openssl ts");
                let answer = if out.status.success() {
                    s.fetch_add(1, Ordering::SeqCst);
                    let body = std::fs::read(&r).unwrap();
                    let mut a = format!(
                        "HTTP/1.0 200 OK\r\nContent-Type: application/timestamp-reply\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    a.extend_from_slice(&body);
                    a
                } else {
                    eprintln!(
                        "openssl ts -reply: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    b"HTTP/1.0 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".to_vec()
                };
                let _ = conn.write_all(&answer);
            }
        });
        Authority {
            pki,
            port,
            served,
            up,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/tsr", self.port)
    }

    /// The CA certificate that issued the authority's.
    pub fn ca(&self) -> PathBuf {
        self.pki.ca()
    }
}

/// The body of an HTTP request (by its Content-Length).
fn read_request(conn: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())?;
        while buf.len() < end + 4 + len {
            let n = conn.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        return Some(buf[end + 4..end + 4 + len].to_vec());
    }
}
