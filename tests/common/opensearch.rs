//! An OpenSearch node for the tests of one test binary: OpenSearch 2.19 from its Maven Central
//! jars (fetched by `.ci/install-test-deps.sh`), one node on loopback, run as user `nobody`
//! when the tests run as root (it refuses root). Started at the first test that asks, shared by
//! the binary's tests, killed when the binary exits ([`Service`]). Spoken to with `curl`.

use super::free_port;
use super::service::{installed, Service};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where `.ci/install-test-deps.sh` puts the node's jars and modules.
const HOME: &str = "/opt/sluice-test/opensearch/home";
/// The user the node runs as when the tests run as root.
const NOBODY: u32 = 65534;

pub struct OpenSearch {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    _node: Service,
    _dir: tempfile::TempDir,
}

/// The node, started if it was not; `None` (said) where its jars are missing and the peers are
/// not required.
pub fn opensearch() -> Option<&'static OpenSearch> {
    static NODE: OnceLock<Option<OpenSearch>> = OnceLock::new();
    NODE.get_or_init(OpenSearch::start).as_ref()
}

impl OpenSearch {
    fn start() -> Option<OpenSearch> {
        if !installed(HOME, "OpenSearch's jars") {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let (port, transport) = (free_port(), free_port());
        let config = dir.path().join("config");
        for d in ["config", "data", "logs", "tmp"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(
            config.join("opensearch.yml"),
            format!(
                "cluster.name: sluice-tests\nnode.name: n1\npath.data: {d}/data\n\
                 path.logs: {d}/logs\nnetwork.host: 127.0.0.1\nhttp.port: {port}\n\
                 transport.port: {transport}\ndiscovery.type: single-node\n\
                 action.auto_create_index: true\n",
                d = dir.path().display()
            ),
        )
        .unwrap();
        std::fs::write(
            config.join("log4j2.properties"),
            "status = error\nappender.c.type = Console\nappender.c.name = c\n\
             appender.c.layout.type = PatternLayout\n\
             appender.c.layout.pattern = [%d][%p][%c{1.}] %m%n\n\
             rootLogger.level = warn\nrootLogger.appenderRef.c.ref = c\n",
        )
        .unwrap();
        if root {
            use std::os::unix::fs::{chown, PermissionsExt};
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            for d in ["config", "data", "logs", "tmp"] {
                let d = dir.path().join(d);
                chown(&d, Some(NOBODY), Some(NOBODY)).unwrap();
                for f in std::fs::read_dir(&d).unwrap() {
                    chown(f.unwrap().path(), Some(NOBODY), Some(NOBODY)).unwrap();
                }
            }
        }
        let mut node = Command::new("java");
        node.arg("-Xms1g")
            .arg("-Xmx1g")
            .arg(format!("-Djava.io.tmpdir={}/tmp", dir.path().display()))
            .arg("-Dlog4j2.disable.jmx=true")
            .arg(format!("-Dopensearch.path.home={HOME}"))
            .arg(format!("-Dopensearch.path.conf={}", config.display()))
            .arg("-cp")
            .arg(format!("{HOME}/lib/*"))
            .arg("org.opensearch.bootstrap.OpenSearch")
            .current_dir(dir.path());
        if root {
            node.uid(NOBODY).gid(NOBODY);
        }
        let os = OpenSearch {
            url: format!("http://127.0.0.1:{port}"),
            _node: Service::new("opensearch", node, dir.path().join("opensearch.out")),
            _dir: dir,
        };
        os._node.start();
        os.wait_ready();
        Some(os)
    }

    /// Waits until the node's cluster is usable.
    fn wait_ready(&self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(180) {
            if let Some((200, _)) = self.try_request(
                "GET",
                "/_cluster/health?wait_for_status=yellow&timeout=2s",
                None,
            ) {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let out =
            std::fs::read_to_string(self._dir.path().join("opensearch.out")).unwrap_or_default();
        panic!("OpenSearch did not answer within 180 s:\n{out}");
    }

    /// `METHOD path` with a JSON `body`: the status and what the node answered; `None` when
    /// it could not be reached.
    fn try_request(&self, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String)> {
        let mut curl = Command::new("curl");
        curl.args(["-s", "-S", "-X", method, "-w", "\n%{http_code}"])
            .arg(format!("{}{path}", self.url))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if body.is_some() {
            curl.args([
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                "@-",
            ]);
        }
        let mut child = curl.spawn().expect("curl (run .ci/install-test-deps.sh)");
        if let Some(b) = body {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b.as_bytes()).unwrap();
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (answer, status) = text.rsplit_once('\n')?;
        match status.trim().parse::<u16>() {
            Ok(0) | Err(_) => None,
            Ok(s) => Some((s, answer.to_string())),
        }
    }

    /// `METHOD path` with a JSON `body`: the status and the answer.
    pub fn request(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        self.try_request(method, path, body)
            .unwrap_or_else(|| panic!("OpenSearch did not answer {method} {path}"))
    }

    /// Creates `index` (one shard, no replica) with `mappings` (`{}` for none).
    pub fn create_index(&self, index: &str, mappings: &str) {
        let body = format!(
            r#"{{"settings":{{"number_of_shards":1,"number_of_replicas":0}},"mappings":{mappings}}}"#
        );
        let (status, answer) = self.request("PUT", &format!("/{index}"), Some(&body));
        assert_eq!(status, 200, "creating {index}: {answer}");
    }

    /// How many documents `index` holds, after a refresh.
    pub fn count(&self, index: &str) -> u64 {
        self.request("POST", &format!("/{index}/_refresh"), None);
        let (status, answer) = self.request("GET", &format!("/{index}/_count"), None);
        // 404: no such index yet; 503 ("all shards failed"): the index a shipper's first
        // bulk request made has no started shard yet. Either way nothing is counted yet.
        if status == 404 || status == 503 {
            return 0;
        }
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        v["count"].as_u64().unwrap_or_else(|| panic!("{answer}"))
    }

    /// Waits until `index` holds `want` documents or none came for 20 s; how many it holds.
    pub fn wait_count(&self, index: &str, want: u64) -> u64 {
        let mut last = (0, Instant::now());
        loop {
            let n = self.count(index);
            if n >= want {
                return n;
            }
            if n != last.0 {
                last = (n, Instant::now());
            } else if last.1.elapsed() > Duration::from_secs(20) {
                return n;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The `field` of every document of `index` (after a refresh), paged with a scroll.
    pub fn field_of_all(&self, index: &str, field: &str) -> Vec<serde_json::Value> {
        self.request("POST", &format!("/{index}/_refresh"), None);
        let mut all = Vec::new();
        let first = format!(r#"{{"size":10000,"_source":["{field}"],"sort":["_doc"]}}"#);
        let (status, mut answer) = self.request(
            "POST",
            &format!("/{index}/_search?scroll=1m&filter_path=_scroll_id,hits.hits._source"),
            Some(&first),
        );
        assert_eq!(status, 200, "{answer}");
        loop {
            let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
            let hits = v["hits"]["hits"].as_array().cloned().unwrap_or_default();
            if hits.is_empty() {
                break;
            }
            all.extend(hits.into_iter().map(|h| h["_source"][field].clone()));
            let id = v["_scroll_id"].as_str().unwrap();
            answer = self
                .request(
                    "POST",
                    "/_search/scroll?filter_path=_scroll_id,hits.hits._source",
                    Some(&format!(r#"{{"scroll":"1m","scroll_id":"{id}"}}"#)),
                )
                .1;
        }
        all
    }
}
