#!/usr/bin/env python3
"""mongodb() into FerretDB 1.24 over PostgreSQL 15: sluice against syslog-ng 3.38's mongodb(),
beside the server's own ceiling (pymongo's `insert_many` of 1,000 documents a call), in one run.

usage: bench/mongodb.py [--count N] [--ng-count N] [--rounds N] [--defaults] [--no-build]

Starts a PostgreSQL cluster (as bench/sql.py does) and FerretDB over it (built by
.ci/install-test-deps.sh into /opt/sluice-test/ferretdb), and a virtual environment with
pymongo (from PyPI) for the ceiling and the counts. Each round, each mode first once, into a
fresh collection:
  insert_many  pymongo, 1,000 documents a call shaped as syslog-ng's (the recipes' ceiling),
  syslog-ng    syslog-ng 3.38's mongodb() with workers(4) (its faster way; 3.38 inserts a
               document a call),
  sluice       sluice's mongodb() with the same options,
the shippers fed 300-byte messages over 4 TCP connections by `sluice loggen` on a
flow-controlled path. A run ends when the shipper's `written` counter reaches the count (a
count_documents() a tenth of a second would scan the collection and take the server's CPU),
then count_documents() checks the collection holds them all.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(tempfile.gettempdir(), "sluice-bench-venv")
FERRET = "/opt/sluice-test/ferretdb/bin/ferretdb"

try:
    import pymongo
except ImportError:
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "pymongo"], check=True)
    os.execv(python, [python, *sys.argv])

sys.path.insert(0, HERE)
import downstream  # noqa: E402
import run  # noqa: E402
import sql  # noqa: E402  (its PostgreSQL cluster)


class Ferret:
    """FerretDB over a PostgreSQL cluster of its own."""

    def __init__(self):
        self.pg = sql.Postgres()
        self.dir = tempfile.mkdtemp(prefix="sluice-bench-ferret-")
        self.port = run.free_port()
        self.proc = subprocess.Popen(
            [FERRET, "--handler=postgresql",
             f"--postgresql-url=postgres://syslog:syslog@127.0.0.1:{self.pg.port}/syslogtest",
             f"--listen-addr=127.0.0.1:{self.port}", "--debug-addr=-", f"--state-dir={self.dir}",
             "--telemetry=disable", "--log-level=warn"],
            stdout=open(os.path.join(self.dir, "ferret.out"), "w"), stderr=subprocess.STDOUT)
        run.wait_port(self.port)
        self.uri = f"mongodb://127.0.0.1:{self.port}/"
        self.client = pymongo.MongoClient(self.uri)

    def collection(self, name):
        return self.client["syslog"][name]

    def cpu(self):
        return run.cpu_seconds(self.proc.pid) + self.pg.cpu()

    def stop(self):
        downstream.stop_service(self.proc, self.dir, 30)
        self.pg.stop()


def document(i):
    return {"DATE": "Nov 24 13:50:17", "FACILITY": "auth", "HOST": "localhost",
            "MESSAGE": downstream.loggen_message(i), "PID": "1234", "PRIORITY": "info",
            "PROGRAM": "prg00000", "TAGS": ".source.s", "SOURCEIP": "127.0.0.1", "SOURCE": "s",
            "LEGACY_MSGHDR": "prg00000[1234]: ", "HOST_FROM": "127.0.0.1"}


def written(mode, work):
    """What the shipper's mongodb() says it wrote."""
    ctl = ["syslog-ng-ctl", "stats", "-c", f"{work}/ctl"] if mode == "syslog-ng" else \
        [run.SLUICE, "ctl", "-c", f"{work}/ctl", "stats"]
    out = subprocess.run(ctl, capture_output=True, text=True).stdout
    return sum(int(line.rsplit(";", 1)[1]) for line in out.splitlines()
               if line.startswith("dst.mongodb;") and ";a;written;" in line)


def run_once(db, mode, args, round_no):
    name = f"{mode.replace('-', '')}{round_no}"
    coll = db.collection(name)
    coll.drop()
    total = 4 * ((args.ng_count if mode == "syslog-ng" else args.count) // 4)
    work = tempfile.mkdtemp(prefix=f"sluice-bench-mongodb-{mode}-")
    proc, loader, cpu = None, 0.0, 0.0
    try:
        if mode == "insert_many":
            docs = [document(i) for i in range(total)]
            server0, t0 = db.cpu(), time.time()
            for b in range(0, total, 1000):
                coll.insert_many(docs[b:b + 1000], ordered=False)
            t1, got = time.time(), coll.count_documents({})
        else:
            options = args.ng_options if mode == "syslog-ng" else args.options
            proc, port = downstream.start_shipper(
                mode, work, f'mongodb(uri("{db.uri}syslog") collection("{name}") {options})',
                defaults=args.defaults)
            server0, cpu0, t0 = db.cpu(), run.cpu_seconds(proc.pid), time.time()
            loader = 1e6 * downstream.send_load(port, total) / total
            # The shipper's own count: count_documents() scans the collection in FerretDB,
            # and polling it would take the server's CPU from the run.
            got, t1 = downstream.wait_count(lambda: written(mode, work), total, proc)
            cpu = 1e6 * (run.cpu_seconds(proc.pid) - cpu0) / total
            if got == total:
                got = coll.count_documents({})
        server = 1e6 * (db.cpu() - server0) / total
    finally:
        err = downstream.stop_shipper(proc, work) if proc is not None else ""
        shutil.rmtree(work, ignore_errors=True)
    note = "" if got == total else f"  INCOMPLETE: {got} of {total}\n{err}"
    rate = total / (t1 - t0) if not note else 0.0
    print(f"{mode:12s} count={total} wall={t1 - t0:.2f}s rate={rate:,.0f} msg/s shipper-cpu={cpu:.2f} us/msg "
          f"server-cpu={server:.1f} us/msg loader-cpu={loader:.2f} us/msg{note}", flush=True)
    return rate, cpu, server, loader


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=200_000)
    p.add_argument("--ng-count", type=int, default=40_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--defaults", action="store_true",
                   help="the servers at the defaults a user writes (no window, queue, thread or workers options)")
    p.add_argument("--modes", default="insert_many,syslog-ng,sluice")
    p.add_argument("--options", default="workers(4)", help="sluice's mongodb() options")
    p.add_argument("--ng-options", default="workers(4)", help="syslog-ng's mongodb() options")
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()
    if not os.path.exists(FERRET):
        raise SystemExit(f"{FERRET} is missing: run .ci/install-test-deps.sh")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=run.ROOT, check=True)
    modes = [m for m in args.modes.split(",") if m]
    db = Ferret()
    try:
        results = downstream.rounds(modes, args.rounds, lambda m, r: run_once(db, m, args, r))
    finally:
        db.stop()
    downstream.print_medians(results, "msg", "server", "insert_many", "70 %", also=[])
    import statistics
    ours, theirs = results.get("sluice"), results.get("syslog-ng")
    if ours and theirs and statistics.median(r[0] for r in theirs) > 0:
        ratio = statistics.median(r[0] for r in ours) / statistics.median(r[0] for r in theirs)
        print(f"sluice / syslog-ng: {ratio:.1f}x the rate (bar 5x)")


if __name__ == "__main__":
    main()
