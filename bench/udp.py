#!/usr/bin/env python3
"""UDP at full rate: how much a server loses, side by side with syslog-ng.

usage: bench/udp.py [--seconds S] [--listeners N] [--rcvbuf BYTES] [--rounds N] [--no-build]
                   [--find-rate]

Starts each setup in turn — sluice's `udp-balancer(listeners(N))`, sluice's `udp()`, and
syslog-ng's `udp()`, each with one file destination and the same `so-rcvbuf()` — and sends it
datagrams with `sluice loggen -D --active-connections 2 -r 0` for S seconds (as fast as one
sender goes). Prints what was sent (loggen's count), what reached the file, the loss, and the
server's CPU per message; sluice also says what the kernel dropped on its sockets.

`--find-rate`: for each setup, the highest total rate (loggen `-r` over its two connections)
at which it loses less than 0.1 %: doubling from 50,000/s while it keeps up, then halving
the gap four times.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ROOT, SLUICE, count_lines, cpu_seconds, free_port, wait_stored  # noqa: E402


def config(setup, port, out, listeners, rcvbuf):
    source = {
        "balancer": f"udp-balancer(ip(127.0.0.1) port({port}) listeners({listeners}) so-rcvbuf({rcvbuf}))",
        "udp": f"udp(ip(127.0.0.1) port({port}) so-rcvbuf({rcvbuf}))",
    }[setup]
    return f"""@version: 3.38
source s {{ {source}; }};
destination d {{ file("{out}"); }};
log {{ source(s); destination(d); }};
"""


def run_once(server, setup, args, rate=0):
    work = tempfile.mkdtemp(prefix="sluice-udp-")
    try:
        port = free_port()
        out = os.path.join(work, "all.log")
        conf = os.path.join(work, "server.conf")
        open(conf, "w").write(config(setup, port, out, args.listeners, args.rcvbuf))
        binary = SLUICE if server == "sluice" else "syslog-ng"
        extra = ["--no-caps"] if server == "syslog-ng" else []
        proc = subprocess.Popen([binary, "-F", *extra, "-f", conf, "-R", f"{work}/persist",
                                 "-p", f"{work}/pid", "-c", f"{work}/ctl"],
                                stdout=subprocess.DEVNULL, stderr=open(f"{work}/stderr", "w"))
        time.sleep(1.0)
        gen = subprocess.run([SLUICE, "loggen", "-D", "--active-connections", "2", "-r", str(rate // 2),
                              "-I", str(args.seconds), "127.0.0.1", str(port)],
                             capture_output=True, text=True)
        sent = sum(int(m) for m in re.findall(r"count=(\d+)", gen.stderr)[-1:]) if gen.stderr else 0
        seen = {}
        wait_stored(out, seen, sent)
        got = count_lines(out, seen)
        dropped = ""
        if server == "sluice":
            stats = subprocess.run([SLUICE, "ctl", "-c", f"{work}/ctl", "stats"], capture_output=True, text=True).stdout
            dropped = sum(int(l.rsplit(";", 1)[1]) for l in stats.splitlines() if ";a;socket_receive_dropped;" in l)
        cpu = cpu_seconds(proc.pid)
        proc.terminate()
        proc.wait()
        return sent, got, dropped, cpu / max(got, 1) * 1e6
    finally:
        shutil.rmtree(work, ignore_errors=True)


def keeps_up(setup, args, rate):
    """Sends at `rate` for the run; whether less than 0.1 % was lost, and what was."""
    sent, got, _, _ = run_once(*setup, args, rate)
    loss = (sent - got) / sent * 100 if sent else 100
    print(f"  {setup[0]} {setup[1]} at {rate:,}/s: sent {sent:,}, lost {loss:.3f} %", flush=True)
    return loss < 0.1, loss


def find_rate(setup, args):
    """The highest rate `setup` keeps up with, and the loss there."""
    good, bad, rate = (0, 0.0), None, 50_000
    while bad is None and rate <= 3_200_000:
        ok, loss = keeps_up(setup, args, rate)
        if ok:
            good, rate = (rate, loss), rate * 2
        else:
            bad = rate
    for _ in range(4 if bad else 0):
        rate = (good[0] + bad) // 2
        ok, loss = keeps_up(setup, args, rate)
        if ok:
            good = (rate, loss)
        else:
            bad = rate
    return good


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--listeners", type=int, default=2)
    ap.add_argument("--rcvbuf", type=int, default=4194304)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--find-rate", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    setups = [("sluice", "balancer"), ("sluice", "udp")]
    if shutil.which("syslog-ng"):
        setups.append(("syslog-ng", "udp"))
    if args.find_rate:
        found = {s: find_rate(s, args) for s in setups}
        print(f"\nthe highest rate with loss below 0.1 %, {args.seconds} s a try, so-rcvbuf({args.rcvbuf})")
        for s, (rate, loss) in found.items():
            print(f"{s[0]:<10} {s[1]:<9} {rate:>10,}/s  (lost {loss:.3f} %)")
        return
    results = {s: [] for s in setups}
    for r in range(args.rounds):
        for s in setups:
            sent, got, dropped, us = run_once(*s, args)
            results[s].append((sent, got, us))
            loss = (sent - got) / sent * 100 if sent else 0
            print(f"round {r + 1} {s[0]} {s[1]}: sent {sent:,}, stored {got:,}, lost {loss:.3f} %"
                  + (f", kernel drops {dropped:,}" if dropped != "" else "") + f", {us:.2f} CPU us/msg")
    print(f"\n{args.seconds} s of loggen -D --active-connections 2 -r 0, so-rcvbuf({args.rcvbuf}), median of {args.rounds}")
    for s in setups:
        sent = statistics.median(x[0] for x in results[s])
        loss = statistics.median((x[0] - x[1]) / x[0] * 100 for x in results[s] if x[0])
        us = statistics.median(x[2] for x in results[s])
        print(f"{s[0]:<10} {s[1]:<9} sent {sent:>12,.0f}/run  lost {loss:6.3f} %  {us:.2f} CPU us/msg")


if __name__ == "__main__":
    main()
