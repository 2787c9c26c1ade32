#!/usr/bin/env python3
"""elasticsearch-http() into OpenSearch: sluice against syslog-ng 3.38, beside the cluster's own
ceiling, on one node started here.

usage: bench/opensearch.py [--count N] [--rounds N] [--heap 1g] [--no-build]

Starts OpenSearch 2.19 from the jars .ci/install-test-deps.sh fetched (one node on loopback, run
as nobody, `--heap` of heap), warms its JVM with `--warm-up` documents, then each round runs on a
fresh index of one shard and no replica, each mode first in turn:
  ceiling    the same-shaped documents as `_bulk` bodies of 1000, made before the clock starts
             and sent by 4 kept-alive connections in parallel (what the cluster takes when the
             shipper costs nothing),
  syslog-ng  syslog-ng 3.38's elasticsearch-http(batch-lines(1000) workers(4)),
  sluice     sluice's, with the same options,
each fed 300-byte messages over 4 TCP connections by `sluice loggen` (as syslog-ng's loggen -S
sends them) on a flow-controlled path. A run ends when the index's `index_total` (documents
the node acknowledged) reaches the count; `_refresh` + `_count` must then agree.

Prints msg/s and the shipper's CPU µs per document (the node's beside it), the medians, and
sluice against the ceiling (the issue's 95 % bar) and against syslog-ng's CPU (its 1/5 bar).
"""

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import downstream  # noqa: E402  (what bench/kafka.py does alike)
import run  # noqa: E402  (the shared helpers of bench/run.py)

HOME = "/opt/sluice-test/opensearch/home"
MODES = ["ceiling", "syslog-ng", "sluice"]
NOBODY = 65534


class Node:
    """One OpenSearch node in a directory of its own."""

    def __init__(self, heap):
        self.dir = tempfile.mkdtemp(prefix="sluice-bench-opensearch-")
        port, transport = run.free_port(), run.free_port()
        self.url = f"http://127.0.0.1:{port}"
        for d in ["config", "data", "logs", "tmp"]:
            os.makedirs(os.path.join(self.dir, d))
        open(os.path.join(self.dir, "config/opensearch.yml"), "w").write(
            f"cluster.name: bench\nnode.name: n1\npath.data: {self.dir}/data\npath.logs: {self.dir}/logs\n"
            f"network.host: 127.0.0.1\nhttp.port: {port}\ntransport.port: {transport}\n"
            "discovery.type: single-node\naction.auto_create_index: true\n")
        open(os.path.join(self.dir, "config/log4j2.properties"), "w").write(
            "status = error\nappender.c.type = Console\nappender.c.name = c\n"
            "appender.c.layout.type = PatternLayout\nappender.c.layout.pattern = [%d][%p] %m%n\n"
            "rootLogger.level = warn\nrootLogger.appenderRef.c.ref = c\n")
        root = os.geteuid() == 0
        if root:
            os.chmod(self.dir, 0o755)
            for top, dirs, files in os.walk(self.dir):
                for name in dirs + files:
                    os.chown(os.path.join(top, name), NOBODY, NOBODY)
        self.proc = subprocess.Popen(
            ["java", f"-Xms{heap}", f"-Xmx{heap}", f"-Djava.io.tmpdir={self.dir}/tmp", "-Dlog4j2.disable.jmx=true",
             f"-Dopensearch.path.home={HOME}", f"-Dopensearch.path.conf={self.dir}/config", "-cp", f"{HOME}/lib/*",
             "org.opensearch.bootstrap.OpenSearch"],
            stdout=open(os.path.join(self.dir, "node.out"), "w"), stderr=subprocess.STDOUT,
            user=NOBODY if root else None, group=NOBODY if root else None)
        started = time.time()
        while True:
            try:
                if self.request("GET", "/_cluster/health?wait_for_status=yellow&timeout=2s")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() - started > 180:
                raise SystemExit("OpenSearch did not start:\n" + open(os.path.join(self.dir, "node.out")).read()[-2000:])
            time.sleep(0.5)

    def request(self, method, path, body=None, ndjson=False):
        data = body.encode() if isinstance(body, str) else body
        kind = "application/x-ndjson" if ndjson else "application/json"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={"Content-Type": kind})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def fresh_index(self, name):
        self.request("DELETE", f"/{name}")
        status, text = self.request("PUT", f"/{name}", json.dumps(
            {"settings": {"number_of_shards": 1, "number_of_replicas": 0}}))
        assert status == 200, text

    def indexed(self, name):
        status, text = self.request("GET", f"/{name}/_stats/indexing")
        if status != 200:
            return 0
        return json.loads(text)["_all"]["primaries"]["indexing"]["index_total"]

    def counted(self, name):
        self.request("POST", f"/{name}/_refresh")
        return json.loads(self.request("GET", f"/{name}/_count")[1])["count"]

    def stop(self):
        downstream.stop_service(self.proc, self.dir, 30)


def bulk_bodies(n, index):
    """`_bulk` bodies of 1000 documents shaped like elasticsearch-http()'s of loggen's lines."""
    bodies = []
    action = json.dumps({"index": {"_index": index}})
    for start in range(0, n, 1000):
        lines = []
        for i in range(start, min(n, start + 1000)):
            msg = downstream.loggen_message(i)
            doc = {"PROGRAM": "prg00000", "PRIORITY": "info", "PID": "1234", "MESSAGE": msg,
                   "ISODATE": "2026-11-24T13:50:17+00:00", "HOST": "localhost", "FACILITY": "auth",
                   "@timestamp": "2026-11-24T13:50:17+00:00"}
            lines.append(action + "\n" + json.dumps(doc, separators=(",", ":")) + "\n")
        bodies.append("".join(lines).encode())
    return bodies


def send_bulk(node, bodies):
    """Four clients in parallel, each a kept-alive connection sending a body at a time."""
    host, port = node.url.removeprefix("http://").split(":")

    def client(mine):
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        for body in mine:
            conn.request("POST", "/_bulk", body, {"Content-Type": "application/x-ndjson"})
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200, answer.status
        conn.close()

    threads = [threading.Thread(target=client, args=(bodies[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_once(mode, node, args, round_no):
    index = f"{mode.replace('-', '')}{round_no}"
    node.fresh_index(index)
    work = tempfile.mkdtemp(prefix=f"sluice-bench-{mode}-")
    total = 4 * (args.count // 4)
    proc = None
    try:
        node_cpu0 = run.cpu_seconds(node.proc.pid)
        if mode == "ceiling":
            bodies = bulk_bodies(total, index)
            node_cpu0, t0 = run.cpu_seconds(node.proc.pid), time.time()
            send_bulk(node, bodies)
            got, t1 = downstream.wait_count(lambda: node.indexed(index), total)
            cpu = 0.0
        else:
            proc, port = downstream.start_shipper(
                mode, work,
                f'elasticsearch-http(url("{node.url}/_bulk") index("{index}") type("") batch-lines(1000) workers(4))')
            node_cpu0, cpu0, t0 = run.cpu_seconds(node.proc.pid), run.cpu_seconds(proc.pid), time.time()
            downstream.send_load(port, total)
            got, t1 = downstream.wait_count(lambda: node.indexed(index), total, proc)
            cpu = 1e6 * (run.cpu_seconds(proc.pid) - cpu0) / total
        node_cpu = 1e6 * (run.cpu_seconds(node.proc.pid) - node_cpu0) / total
        counted = node.counted(index)
    finally:
        err = downstream.stop_shipper(proc, work) if proc is not None else ""
        shutil.rmtree(work, ignore_errors=True)
        node.request("DELETE", f"/{index}")
    note = "" if got >= total and counted == got else f"  INCOMPLETE: {got} acknowledged, {counted} counted of {total}\n{err}"
    rate = total / (t1 - t0) if not note else 0.0
    print(f"{mode:10s} count={total} wall={t1 - t0:.2f}s rate={rate:,.0f} doc/s shipper-cpu={cpu:.2f} us/doc "
          f"node-cpu={node_cpu:.1f} us/doc{note}", flush=True)
    return rate, cpu, node_cpu


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=500_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--heap", default="1g")
    p.add_argument("--warm-up", type=int, default=300_000)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()
    if not os.path.exists(os.path.join(HOME, ".done")):
        raise SystemExit(f"{HOME} is missing: run .ci/install-test-deps.sh")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=run.ROOT, check=True)
    modes = [m for m in args.modes.split(",") if m]
    if "syslog-ng" in modes and not os.path.exists("/usr/share/syslog-ng/include/scl/elasticsearch/elastic-http.conf"):
        modes.remove("syslog-ng")
        print("syslog-ng's elasticsearch-http() (syslog-ng-scl, syslog-ng-mod-http) is not installed: left out")
    node = Node(args.heap)
    try:
        node.fresh_index("warm")
        send_bulk(node, bulk_bodies(args.warm_up, "warm"))
        downstream.wait_count(lambda: node.indexed("warm"), args.warm_up)
        node.request("DELETE", "/warm")
        results = downstream.rounds(modes, args.rounds, lambda m, r: run_once(m, node, args, r))
    finally:
        node.stop()
    downstream.print_medians(results, "doc", "node", "ceiling", "95 %")


if __name__ == "__main__":
    main()
