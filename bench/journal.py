#!/usr/bin/env python3
"""The journal source, side by side with syslog-ng's systemd-journal() and rsyslog's
imjournal, in one run.

usage: bench/journal.py [--entries N] [--rounds N] [--servers sluice,syslog-ng,rsyslog]
                        [--no-build]

Writes a journal of N entries with systemd-journal-remote (the messages of
../shared/corpus/loghub-rfc3164.log over and over, with their programs; generated ones when
the corpus is absent), then for each server in turn starts it in a private mount namespace
where that journal is the machine's (tests/data/journal-namespace.sh; needs root), reading
the journal from its start into one file, and waits until the file holds every entry.
Prints entries per second, CPU µs per entry and peak RSS, the medians of the rounds, and the
ratios.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import RSYSLOG, SLUICE, ROOT, installed, measure, print_medians  # noqa: E402

CORPUS = os.path.join(ROOT, "..", "shared", "corpus", "loghub-rfc3164.log")
NAMESPACE = os.path.join(ROOT, "tests", "data", "journal-namespace.sh")
REMOTE = "/lib/systemd/systemd-journal-remote"
LINE = re.compile(rb"^<(\d+)>\w{3} [ \d]\d \d\d:\d\d:\d\d (\S+) ([^:\[ ]+)(?:\[(\d+)\])?: ?(.*)$")


def messages():
    """(priority, host, program, pid, message) of the corpus, or generated ones."""
    if not os.path.exists(CORPUS):
        print(f"note: {CORPUS} is absent; generated messages are written instead", file=sys.stderr)
        return [(13, b"host%d" % (i % 50), b"app", b"%d" % i, b"generated message %d with some text" % i)
                for i in range(10000)]
    out = []
    for line in open(CORPUS, "rb").read().splitlines():
        m = LINE.match(line)
        if m:
            out.append((int(m[1]), m[2], m[3], m[4] or b"", m[5]))
    return out


def write_journal(work, n):
    """A journal of `n` entries under work/journal/<machine-id>/."""
    machine = open("/etc/machine-id").read().strip()
    directory = os.path.join(work, "journal")
    os.makedirs(os.path.join(directory, machine))
    boot = open("/proc/sys/kernel/random/boot_id").read().strip().replace("-", "").encode()
    source = messages()
    remote = subprocess.Popen([REMOTE, "-o", os.path.join(directory, machine, "system.journal"), "-"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    chunk = []
    for i in range(n):
        pri, host, program, pid, msg = source[i % len(source)]
        chunk.append(b"__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=%s\n_HOSTNAME=%s\n"
                     b"PRIORITY=%d\nSYSLOG_FACILITY=%d\nSYSLOG_IDENTIFIER=%s\n_PID=%s\nMESSAGE=%s\n\n"
                     % (1_700_000_000_000_000 + i, i + 1, boot, host, pri & 7, pri >> 3, program, pid, msg))
        if len(chunk) == 10000:
            remote.stdin.write(b"".join(chunk))
            chunk = []
    remote.stdin.write(b"".join(chunk))
    remote.stdin.close()
    if remote.wait() != 0:
        raise SystemExit("systemd-journal-remote failed")
    return directory


def start(server, work, journal, out):
    err = open(os.path.join(work, "stderr"), "w")
    wrap = ["unshare", "--mount", "--propagation", "private", NAMESPACE, journal]
    if server == "rsyslog":
        lib = f"{RSYSLOG}/usr/lib/x86_64-linux-gnu"
        conf = os.path.join(work, "rsyslog.conf")
        open(conf, "w").write(f"""global(workDirectory="{work}")
module(load="imjournal" StateFile="{work}/imjournal.state" Ratelimit.Interval="0")
action(type="omfile" file="{out}")
""")
        cmd = [f"{RSYSLOG}/usr/sbin/rsyslogd", "-n", "-f", conf, "-i", f"{work}/pid", "-M", f"{lib}/rsyslog"]
        return subprocess.Popen(wrap + cmd, env=dict(os.environ, LD_LIBRARY_PATH=lib),
                                stdout=subprocess.DEVNULL, stderr=err)
    conf = os.path.join(work, "server.conf")
    open(conf, "w").write(f"""@version: 3.38
source s {{ systemd-journal(); }};
destination d {{ file("{out}"); }};
log {{ source(s); destination(d); }};
""")
    binary = SLUICE if server == "sluice" else "syslog-ng"
    extra = ["--no-caps"] if server == "syslog-ng" else []
    cmd = [binary, "-F", *extra, "-f", conf, "-R", f"{work}/persist", "-p", f"{work}/pid", "-c", f"{work}/ctl"]
    return subprocess.Popen(wrap + cmd, stdout=subprocess.DEVNULL, stderr=err)


def read_once(server, journal, n):
    work = tempfile.mkdtemp(prefix=f"sluice-journal-{server}-")
    try:
        out = os.path.join(work, "out.log")
        started = time.time()
        proc = start(server, work, journal, out)
        return measure(server, proc, out, n, started, "entry")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--servers", default="sluice,syslog-ng,rsyslog")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists(REMOTE):
        raise SystemExit(f"needs root (a private mount namespace) and {REMOTE} (systemd-journal-remote)")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    servers = [s for s in args.servers.split(",") if installed(s) or print(f"note: {s} is not installed", file=sys.stderr)]
    work = tempfile.mkdtemp(prefix="sluice-journal-")
    try:
        journal = write_journal(work, args.entries)
        results = {s: [] for s in servers}
        for r in range(args.rounds):
            for s in servers:
                results[s].append(read_once(s, journal, args.entries))
                rate, us, rss = results[s][-1]
                print(f"round {r + 1} {s}: {rate:,.0f} entries/s, {us:.2f} CPU us/entry, {rss:.0f} MiB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_medians(results, "entry", f"{args.entries:,} journal entries, median of {args.rounds} rounds")


if __name__ == "__main__":
    main()
