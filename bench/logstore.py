#!/usr/bin/env python3
"""logstore() against plain files, and against syslog-ng's plain files and secure logging.

usage: bench/logstore.py [--corpus FILE] [--count N] [--conns N] [--rounds N] [--per-host]
                         [--compress 0-9] [--no-build]

Each round runs, one after another on the same TCP load (`sluice loggen -R CORPUS`, as
bench/run.py sends it):
  sluice-file      sluice writing a plain file (syslog-ng's file format),
  sluice-logstore  sluice writing a logstore() archive of the same lines, compressed
                   (compress(N), zstd), encrypted for an RSA certificate and sealed,
  syslog-ng-file   syslog-ng 3.38 writing the plain file,
  syslog-ng-slog   syslog-ng writing its secure logging ($(slog), syslog-ng-mod-slog): each
                   line encrypted and MACed on its own, as text; it writes its key and MAC
                   files at every message, so it gets --slog-count messages (100,000).
With --per-host each writes a file per host (`${HOST}`), after a first pass of the corpus made
every host's file, as bench/run.py --per-host does.

The rate is messages over the wall time until the destination holds them all: lines counted
in the files; for the archive, the destination's `written` counter (`sluice ctl stats`), which
counts what the archive's writers took into chunks. CPU µs per message is the server's own.
Prints the medians, logstore against sluice's plain file (the issue's 60 % bar) and against
syslog-ng, and the bytes each stored per message.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the shared helpers of bench/run.py)

ROOT = run.ROOT
CERT = os.path.join(ROOT, "crates/logstore/testdata/reader.pem")
KEY = os.path.join(ROOT, "crates/logstore/testdata/reader.key")
MODES = ["sluice-file", "sluice-logstore", "syslog-ng-file", "syslog-ng-slog"]


def config(mode, args, port, work, out):
    path = os.path.join(out, "${HOST}") if args.per_host else out
    if mode == "sluice-logstore":
        seal = os.path.join(work, "seal.key")
        subprocess.run([run.SLUICE, "logstore", "keygen", "--seal-key", seal,
                        "--verify-key", os.path.join(work, "verify.key")], check=True, capture_output=True)
        dest = (f'logstore("{path}.lgs" encrypt-certificate("{CERT}") seal-key("{seal}") '
                f'compress({args.compress}))')
    elif mode == "syslog-ng-slog":
        master, host = os.path.join(work, "master.key"), os.path.join(work, "host.key")
        subprocess.run(["slogkey", "-m", master], check=True, capture_output=True)
        subprocess.run(["slogkey", "-d", master, "00:00:00:00:00:00", "1", host], check=True, capture_output=True)
        template = f'$(slog -k {host} -m {os.path.join(work, "mac.dat")} $RAWMSG)\\n'
        dest = f'file("{path}.log" template("{template}") flush-lines(1000))'
    else:
        dest = f'file("{path}.log" flush-lines(1000))'
    return f"""@version: 3.38
options {{ threaded(yes); log-fifo-size(1000000); use-dns(no); keep-hostname(yes); stats-freq(0); flush-lines(1000); create-dirs(yes); }};
source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) max-connections(20000) log-iw-size(1000000) log-fetch-limit(1000)); }};
destination d {{ {dest}; }};
log {{ source(s); destination(d); }};
"""


def written(work):
    """The archive destination's `written` counter."""
    out = subprocess.run([run.SLUICE, "ctl", "-c", f"{work}/ctl", "stats"], capture_output=True, text=True)
    return sum(int(line.rsplit(";", 1)[1]) for line in out.stdout.splitlines()
               if line.startswith("dst.logstore;") and ";written;" in line)


def wait_written(work, want):
    last, grew = -1, time.time()
    while True:
        n, now = written(work), time.time()
        if n != last:
            last, grew = n, now
        if n >= want or now - grew >= 5:
            return grew
        time.sleep(0.02)


def run_once(mode, args, lines):
    work = tempfile.mkdtemp(prefix=f"sluice-bench-{mode}-")
    out = os.path.join(work, "out")
    if args.per_host:
        os.makedirs(out)
    port = run.free_port()
    conf = os.path.join(work, "server.conf")
    open(conf, "w").write(config(mode, args, port, work, out))
    server = run.SLUICE if mode.startswith("sluice") else "syslog-ng"
    extra = ["--no-caps"] if server == "syslog-ng" else []
    proc = subprocess.Popen([server, "-F", *extra, "-f", conf, "-R", f"{work}/persist", "-p", f"{work}/pid",
                             "-c", f"{work}/ctl"], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "stderr"), "w"))
    store = mode == "sluice-logstore"
    target = out if args.per_host else out + (".lgs" if store else ".log")
    try:
        run.wait_port(port)
        time.sleep(0.3)
        loggen = [run.SLUICE, "loggen", "-Q", "-r", "0", "--active-connections", str(args.conns), "-I", "3600",
                  "-R", args.corpus, "-l", "-d"]
        count = args.slog_count if mode == "syslog-ng-slog" else args.count
        total = args.conns * (count // args.conns)
        seen, before = {}, 0
        if args.per_host:
            subprocess.run([*loggen, "-n", str(lines), "127.0.0.1", str(port)], capture_output=True, check=True)
            before = args.conns * lines
            if store:
                wait_written(work, before)
            else:
                run.wait_stored(target, seen, before)
        cpu0, t0 = run.cpu_seconds(proc.pid), time.time()
        subprocess.run([*loggen, "-n", str(count // args.conns), "127.0.0.1", str(port)],
                       capture_output=True, check=True)
        t1 = wait_written(work, before + total) if store else run.wait_stored(target, seen, before + total)
        cpu1, rss = run.cpu_seconds(proc.pid), run.peak_rss_mib(proc.pid)
        got = (written(work) if store else run.count_lines(target, seen)) - before
    finally:
        proc.terminate()
        proc.wait(30)
    size = run.stored_bytes(target) / max(before + total, 1)
    err = open(os.path.join(work, "stderr")).read()
    shutil.rmtree(work, ignore_errors=True)
    note = "" if got >= total else f"  INCOMPLETE: {got} of {total}\n{err[-500:]}"
    rate = total / (t1 - t0) if not note else 0.0
    cpu = 1e6 * (cpu1 - cpu0) / total
    print(f"{mode:16s} count={total} wall={t1 - t0:.2f}s rate={rate:,.0f} msg/s cpu={cpu:.2f} us/msg "
          f"peak-rss={rss:.0f} MiB bytes/msg={size:.1f}{note}", flush=True)
    return rate, cpu, rss, size


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default=os.path.join(ROOT, "../shared/corpus/loghub-rfc3164.log"))
    p.add_argument("--count", type=int, default=1_000_000)
    p.add_argument("--slog-count", type=int, default=100_000)
    p.add_argument("--conns", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compress", type=int, default=3)
    p.add_argument("--per-host", action="store_true")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()
    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} is absent: give --corpus FILE of syslog lines")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    modes = [m for m in args.modes.split(",") if m]
    if shutil.which("syslog-ng") is None:
        modes = [m for m in modes if not m.startswith("syslog-ng")]
        print("syslog-ng is not installed: left out (.ci/install-test-deps.sh installs it)")
    if "syslog-ng-slog" in modes and shutil.which("slogkey") is None:
        modes.remove("syslog-ng-slog")
        print("syslog-ng-mod-slog is not installed: syslog-ng-slog left out")
    lines = sum(1 for line in open(args.corpus, "rb") if line.strip())
    results = {m: [] for m in modes}
    for r in range(args.rounds):
        print(f"round {r + 1}", flush=True)
        for m in modes:
            results[m].append(run_once(m, args, lines))
    print(f"\n{'mode':<16} {'msg/s':>12} {'CPU us/msg':>11} {'peak MiB':>9} {'bytes/msg':>10}")
    med = {}
    for m, rows in results.items():
        med[m] = tuple(statistics.median(x[i] for x in rows) for i in range(4))
        print(f"{m:<16} {med[m][0]:>12,.0f} {med[m][1]:>11.2f} {max(x[2] for x in rows):>9.0f} {med[m][3]:>10.1f}")
    store = med.get("sluice-logstore")
    if store:
        for m in ("sluice-file", "syslog-ng-file", "syslog-ng-slog"):
            if m in med and med[m][0] > 0:
                print(f"sluice-logstore / {m}: {store[0] / med[m][0]:.2f}x the rate, "
                      f"{store[3] / med[m][3]:.1%} of the bytes")


if __name__ == "__main__":
    main()
