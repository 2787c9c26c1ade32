#!/usr/bin/env python3
"""The file sources, side by side with syslog-ng (and rsyslog's imfile), in one run.

usage: bench/files.py [--lines N] [--dirs D --files F] [--idle FILES --idle-seconds S]
                      [--rounds N] [--servers sluice,syslog-ng,rsyslog] [--no-build]

Reading: writes LINES lines (the lines of ../shared/corpus/loghub-rfc3164.log over and over,
or generated lines when the corpus is absent) into one file — or spread over D directories of
F files each — then for each server in turn starts it with a `file()` source (a
`wildcard-file()` over the directories) and one file destination, and waits until the
destination holds every line. Prints lines per second, CPU µs per line and peak RSS, the
medians of the rounds, and the ratios.

`--idle FILES`: FILES files that do not grow, followed for `--idle-seconds` by a
`wildcard-file()`; prints the CPU each server used in that time (it should be almost none)
and its peak memory.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import RSYSLOG, SLUICE, ROOT, cpu_seconds, installed, measure, peak_rss_mib, print_medians  # noqa: E402

CORPUS = os.path.join(ROOT, "..", "shared", "corpus", "loghub-rfc3164.log")


def make_lines(n):
    """`n` lines: the corpus over and over, or generated ones."""
    if os.path.exists(CORPUS):
        corpus = open(CORPUS, "rb").read().splitlines(keepends=True)
    else:
        print(f"note: {CORPUS} is absent; generated lines are read instead", file=sys.stderr)
        corpus = [b"<13>Nov 24 10:00:00 host%d app[%d]: generated line %d with some text to read\n" % (i % 50, i, i) for i in range(10000)]
    out = []
    while len(out) < n:
        out.extend(corpus[: n - len(out)])
    return out


def write_input(work, lines, dirs, files):
    """The input: one file, or `dirs` × `files` files holding the lines between them."""
    base = os.path.join(work, "in")
    os.makedirs(base)
    if dirs == 0:
        with open(os.path.join(base, "app.log"), "wb") as f:
            f.writelines(lines)
        return base
    per = len(lines) // (dirs * files)
    at = 0
    for d in range(dirs):
        os.makedirs(os.path.join(base, f"d{d}"))
        for k in range(files):
            with open(os.path.join(base, f"d{d}", f"f{k}.log"), "wb") as f:
                f.writelines(lines[at:at + per])
            at += per
    return base


def source(base, dirs, files):
    if dirs == 0:
        return f'file("{base}/app.log")'
    return (f'wildcard-file(base-dir("{base}") filename-pattern("*.log") recursive(yes) '
            f'max-files({dirs * files + 10}))')


def rsyslog_input(base, dirs):
    pattern = f"{base}/app.log" if dirs == 0 else f"{base}/*/*.log"
    return f'input(type="imfile" File="{pattern}" Tag="app" freshStartTail="off")'


def start(server, work, base, out, dirs, files):
    err = open(os.path.join(work, "stderr"), "w")
    if server == "rsyslog":
        lib = f"{RSYSLOG}/usr/lib/x86_64-linux-gnu"
        conf = os.path.join(work, "rsyslog.conf")
        open(conf, "w").write(f"""global(workDirectory="{work}")
module(load="imfile" mode="inotify")
{rsyslog_input(base, dirs)}
action(type="omfile" file="{out}")
""")
        cmd = [f"{RSYSLOG}/usr/sbin/rsyslogd", "-n", "-f", conf, "-i", f"{work}/pid", "-M", f"{lib}/rsyslog"]
        return subprocess.Popen(cmd, env=dict(os.environ, LD_LIBRARY_PATH=lib), stdout=subprocess.DEVNULL, stderr=err)
    conf = os.path.join(work, "server.conf")
    open(conf, "w").write(f"""@version: 3.38
options {{ keep-hostname(yes); }};
source s {{ {source(base, dirs, files)}; }};
destination d {{ file("{out}"); }};
log {{ source(s); destination(d); }};
""")
    binary = SLUICE if server == "sluice" else "syslog-ng"
    extra = ["--no-caps"] if server == "syslog-ng" else []
    cmd = [binary, "-F", *extra, "-f", conf, "-R", f"{work}/persist", "-p", f"{work}/pid", "-c", f"{work}/ctl"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)


def read_once(server, lines, dirs, files):
    work = tempfile.mkdtemp(prefix=f"sluice-files-{server}-")
    try:
        base = write_input(work, lines, dirs, files)
        out = os.path.join(work, "out.log")
        started = time.time()
        proc = start(server, work, base, out, dirs, files)
        want = (len(lines) // (dirs * files)) * dirs * files if dirs else len(lines)
        return measure(server, proc, out, want, started, "line")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def idle_once(server, files, seconds):
    work = tempfile.mkdtemp(prefix=f"sluice-idle-{server}-")
    try:
        dirs = max(1, files // 1000)
        base = write_input(work, [b"x\n"] * (dirs * (files // dirs)), dirs, files // dirs)
        proc = start(server, work, base, os.path.join(work, "out.log"), dirs, files // dirs)
        time.sleep(5)
        before = cpu_seconds(proc.pid)
        time.sleep(seconds)
        used = cpu_seconds(proc.pid) - before
        rss = peak_rss_mib(proc.pid)
        proc.terminate()
        proc.wait()
        return used / seconds * 100, rss
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--dirs", type=int, default=0)
    ap.add_argument("--files", type=int, default=0)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--idle-seconds", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--servers", default="sluice,syslog-ng,rsyslog")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    servers = [s for s in args.servers.split(",") if installed(s) or print(f"note: {s} is not installed", file=sys.stderr)]
    if args.idle:
        for s in servers:
            cpu, rss = idle_once(s, args.idle, args.idle_seconds)
            print(f"{s}: {args.idle} idle files followed: {cpu:.2f} % of a core, peak {rss:.0f} MiB")
        return
    lines = make_lines(args.lines)
    results = {s: [] for s in servers}
    for r in range(args.rounds):
        for s in servers:
            results[s].append(read_once(s, lines, args.dirs, args.files))
            rate, us, rss = results[s][-1]
            print(f"round {r + 1} {s}: {rate:,.0f} lines/s, {us:.2f} CPU us/line, {rss:.0f} MiB")
    what = f"{args.dirs} dirs x {args.files} files" if args.dirs else "one file"
    print_medians(results, "line", f"{len(lines):,} lines, {what}, median of {args.rounds} rounds")


if __name__ == "__main__":
    main()
