#!/usr/bin/env python3
"""`memory-limit()` under what senders can make sluice hold: the resident set against the limit
and against what the budget says it holds.

usage: bench/memory_limit.py [--scenario partial,contexts,counters] [--no-build]

  partial   10,000 connections each 60,000 bytes into a line, never finished, under
            memory-limit(128M) (issue 55: 600-634 MB resident, the budget saying 67 MB)
  contexts  2,000,000 messages each opening a correlation context of its own
            (`grouping-by(key("$MSG"))`, an hour's timeout) under memory-limit(256M)
            (issue 55: 466 MB resident, the budget saying 199 MB)
  counters  1,000,000 host names at stats-level(3), with no limit on dynamic counters
            (`stats-max-dynamics(-1)`), under memory-limit(128M)

Each prints the resident set (VmRSS) and its peak (VmHWM) once the load is in, the budget's
`memory_usage` and `connections_memory`, and what the resident set passes the limit by.
"""

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the shared helpers of bench/run.py)


def status(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def stat(work, name):
    """The sum of the counters whose type is `name` (`global;memory;;a;memory_usage`: a whole
    line's name without its value)."""
    out = subprocess.run([run.SLUICE, "ctl", "-c", f"{work}/ctl", "stats"], capture_output=True,
                         text=True).stdout
    total = 0
    for line in out.splitlines():
        key, _, value = line.rpartition(";")
        if key == name or (";" not in name and key.endswith(f";{name}")):
            total += int(value)
    return total


def start(work, options, source, middle=""):
    port = run.free_port()
    conf = os.path.join(work, "server.conf")
    open(conf, "w").write(f"""@version: 3.38
options {{ {options} }};
source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) {source}); }};
{middle}
destination d {{ file("{work}/out.log" template("x\\n")); }};
log {{ source(s); {"parser(p);" if middle else ""} destination(d); flags(flow-control); }};
""")
    proc = subprocess.Popen([run.SLUICE, "-F", "-f", conf, "-R", f"{work}/persist", "-c", f"{work}/ctl"],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "stderr"), "w"))
    run.wait_port(port)
    return proc, port


def send_and_wait(work, proc, port, n, line):
    """Sends `line(i)` for `i` below `n` over one connection, in runs of 10,000, and waits
    until the file has a line (`x`) for each, and two seconds more."""
    with socket.create_connection(("127.0.0.1", port)) as c:
        for start in range(0, n, 10_000):
            c.sendall("".join(line(i) for i in range(start, min(n, start + 10_000))).encode())
    while os.path.getsize(f"{work}/out.log") < 2 * n and proc.poll() is None:
        time.sleep(0.5)
    time.sleep(2)


def report(name, proc, work, limit):
    rss, peak = status(proc.pid, "VmRSS"), status(proc.pid, "VmHWM")
    used = stat(work, "global;memory;;a;memory_usage")
    conns = stat(work, "global;memory;;a;connections_memory")
    mib = lambda b: f"{b / 2**20:,.1f} MiB"  # noqa: E731
    print(f"{name}: limit {mib(limit)}; resident {mib(rss)} (peak {mib(peak)}), "
          f"{mib(rss - limit)} past the limit; budget in use {mib(used)}, of it connections {mib(conns)}",
          flush=True)


def partial(work):
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    limit = 128 << 20
    proc, port = start(work, "memory-limit(128M); stats-freq(0);", "max-connections(20000)")
    line = b"<13>Nov 27 10:00:00 host app: " + b"x" * 60_000
    conns = []
    for _ in range(10_000):
        try:
            c = socket.create_connection(("127.0.0.1", port))
            c.setblocking(False)
            try:
                c.send(line)
            except BlockingIOError:
                pass
            conns.append(c)
        except OSError:
            pass
    time.sleep(5)
    print(f"partial: {len(conns)} connections open, {stat(work, 'rejected_connections')} refused")
    report("partial", proc, work, limit)
    proc.terminate()
    proc.wait()


def contexts(work):
    limit = 256 << 20
    proc, port = start(work, "memory-limit(256M); stats-freq(0);", "log-iw-size(100000)",
                       'parser p { grouping-by(key("$MSG") scope(global) timeout(3600) '
                       'aggregate(value("MESSAGE" "ended"))); };')
    send_and_wait(work, proc, port, 2_000_000, lambda i: f"<13>Nov 27 10:00:00 h app: k{i:08d}\n")
    print(f"contexts: {stat(work, 'contexts')} open, {stat(work, 'contexts_evicted')} ended early")
    report("contexts", proc, work, limit)
    proc.terminate()
    proc.wait()


def counters(work):
    limit = 128 << 20
    proc, port = start(work, "memory-limit(128M); stats-level(3); stats-max-dynamics(-1); stats-freq(0);",
                       "keep-hostname(yes) log-iw-size(100000)")
    send_and_wait(work, proc, port, 1_000_000, lambda i: f"<13>Nov 27 10:00:00 host{i:07d} app: m\n")
    made = subprocess.run([run.SLUICE, "ctl", "-c", f"{work}/ctl", "stats"], capture_output=True,
                          text=True).stdout.count(";d;")
    print(f"counters: {made} dynamic counters, {stat(work, 'global;dynamic_counters;;a;dropped')} counts found none")
    report("counters", proc, work, limit)
    proc.terminate()
    proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="partial,contexts,counters")
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=run.ROOT, check=True)
    for name in args.scenario.split(","):
        with tempfile.TemporaryDirectory(prefix=f"sluice-bench-memory-{name}-") as work:
            globals()[name](work)


if __name__ == "__main__":
    main()
