#!/usr/bin/env python3
"""A soak: sluice under a realistic, changing load for a long time, its memory and its books
sampled every 10 s (issue 33).

usage: bench/soak.py [--minutes N] [--clients N] [--rate MSG_S] [--cycle S] [--sample S]
                     [--out DIR] [--no-build]

Runs the release build on one configuration — a TCP source (clients that connect, send a
few hundred messages and leave, `--clients` of them at once), a UDP source fed in bursts, a
file per host, a forwarding destination with a disk buffer to a receiver that goes away for
40 s every 3 minutes (the buffer fills, then drains), and a lossy forwarding destination to
the same receiver — and meanwhile reloads every 3 minutes (alternating two templates, so a
destination is rebuilt under load) and removes the files and reopens them every minute, as
logrotate would. Every 10 s it samples sluice's resident memory, open descriptors, threads,
the rate, the number of counters and `sluice ctl ledger`. `--cycle 60 --sample 5` makes the
reloads and outages three times as frequent: what leaks per reload or per outage shows in
minutes.

Fails (exit 1) when a sample's books do not balance, or when resident memory grows after
the warm-up (the first fifth of the run): the slope of a line fitted to the samples, in MiB
an hour, must stay under 5 % of the mean. Writes samples.csv and soak.png (RSS, rate,
descriptors and threads over time) to --out (default: bench/results/soak-DATE).
"""

import argparse
import csv
import datetime
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import run

CONFIG = """@version: 3.38
options {{ stats-level(1); log-fifo-size(100000); memory-limit(256M); keep-hostname(yes); }};
source s_tcp {{ network(ip(127.0.0.1) port({tcp}) max-connections(2000) log-iw-size(200000)); }};
source s_udp {{ network(ip(127.0.0.1) port({udp}) transport(udp) so-rcvbuf(8388608)); }};
destination d_hosts {{ file("{work}/out/${{HOST}}.log" template("{template}")); }};
destination d_relay {{ network("127.0.0.1" port({sink}) time-reopen(1)
    disk-buffer(reliable(no) disk-buf-size(268435456) dir("{work}/buffer"))); }};
destination d_lossy {{ network("127.0.0.1" port({sink}) time-reopen(1) log-fifo-size(20000)); }};
log {{ source(s_tcp); source(s_udp); destination(d_hosts); destination(d_relay); flags(flow-control); }};
log {{ source(s_udp); destination(d_lossy); }};
"""

TEMPLATES = ["${ISODATE} ${HOST} ${MSGHDR}${MSG}\\n", "${R_ISODATE} ${HOST} ${PROGRAM}: ${MSG}\\n"]


def line(host, i):
    return (f"<14>Nov 27 10:00:00 host{host:03d} app[{i % 1000}]: soak message {i} "
            f"{'x' * random.randint(20, 400)}\n").encode()


class Receiver:
    """The forwarding destinations' server: counts lines; can go away and come back."""

    def __init__(self, port):
        self.port, self.lines, self.up = port, 0, False
        self.lock = threading.Lock()
        self.conns, self.listener = [], None

    def start(self):
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.up = True
        threading.Thread(target=self.accept, args=(self.listener,), daemon=True).start()

    def stop(self):
        self.up = False
        # shutdown() wakes the thread blocked in accept(); close() alone leaves the socket
        # listening until that accept returns.
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
            self.conns = []

    def accept(self, listener):
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self.read, args=(conn,), daemon=True).start()

    def read(self, conn):
        while True:
            try:
                data = conn.recv(1 << 16)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.lines += data.count(b"\n")


class Load:
    """TCP clients that come and go, and UDP bursts, at about `rate` messages a second."""

    def __init__(self, tcp, udp, clients, rate):
        self.tcp, self.udp, self.clients, self.rate = tcp, udp, clients, rate
        self.stop = threading.Event()
        self.sent = 0
        self.lock = threading.Lock()

    def count(self, n):
        with self.lock:
            self.sent += n

    def client(self, k):
        per_client = self.rate * 0.8 / self.clients
        i = 0
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.tcp))
                for _ in range(random.randint(50, 500)):
                    if self.stop.is_set():
                        break
                    s.sendall(line(k % 200, i))
                    i += 1
                    self.count(1)
                    time.sleep(random.expovariate(per_client))
                s.close()
            except OSError:
                time.sleep(1)
            time.sleep(random.uniform(0, 2))

    def bursts(self):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        i = 0
        while not self.stop.wait(5):
            n = int(self.rate * 0.2 * 5)
            for _ in range(n):
                u.sendto(line(200 + i % 50, i).rstrip(b"\n"), ("127.0.0.1", self.udp))
                i += 1
            self.count(n)

    def start(self):
        for k in range(self.clients):
            threading.Thread(target=self.client, args=(k,), daemon=True).start()
        threading.Thread(target=self.bursts, daemon=True).start()


def proc_status(pid):
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for row in f:
            k, _, v = row.partition(":")
            status[k] = v.strip()
    return int(status["VmRSS"].split()[0]) / 1024, int(status["Threads"])


def ctl(work, *args):
    p = subprocess.run([run.SLUICE, "ctl", "-c", os.path.join(work, "ctl"), *args],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def counter(work, name):
    _, out = ctl(work, "query", "get", "--sum", name)
    try:
        return int(out.strip())
    except ValueError:
        return 0


def slope_per_hour(ts, ys):
    n = len(ts)
    mt, my = sum(ts) / n, sum(ys) / n
    var = sum((t - mt) ** 2 for t in ts)
    return 0.0 if var == 0 else 3600 * sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [r["t"] / 60 for r in rows]
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    axes[0].plot(t, [r["rss_mib"] for r in rows])
    axes[0].set_ylabel("resident MiB")
    axes[0].set_ylim(bottom=0)
    axes[1].plot(t, [r["rate"] for r in rows], label="received msg/s")
    axes[1].plot(t, [r["queued"] for r in rows], label="queued (all destinations)")
    axes[1].legend()
    axes[2].plot(t, [r["fds"] for r in rows], label="open descriptors")
    axes[2].plot(t, [r["threads"] for r in rows], label="threads")
    axes[2].legend()
    axes[2].set_xlabel("minutes")
    for a in axes:
        a.grid(True, alpha=0.3)
    fig.suptitle("sluice soak: resident memory, rate, descriptors")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=60)
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--cycle", type=int, default=180,
                   help="seconds between reloads and between receiver outages (each 2/9 of it)")
    p.add_argument("--sample", type=int, default=10, help="seconds between samples")
    p.add_argument("--out", default=None)
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--bin", "sluice"], cwd=run.ROOT, check=True)
    out_dir = args.out or os.path.join(run.ROOT, "bench", "results",
                                       "soak-" + datetime.date.today().isoformat())
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="sluice-soak-")
    os.makedirs(os.path.join(work, "out"))
    tcp, udp, sink = run.free_port(), run.free_port(), run.free_port()
    conf = os.path.join(work, "sluice.conf")

    def write_config(n):
        with open(conf, "w") as f:
            f.write(CONFIG.format(tcp=tcp, udp=udp, sink=sink, work=work, template=TEMPLATES[n % 2]))

    write_config(0)
    receiver = Receiver(sink)
    receiver.start()
    proc = subprocess.Popen([run.SLUICE, "-F", "-f", conf, "-R", os.path.join(work, "persist"),
                             "-c", os.path.join(work, "ctl")],
                            stderr=open(os.path.join(work, "stderr"), "w"))
    run.wait_port(tcp)
    load = Load(tcp, udp, args.clients, args.rate)
    load.start()
    rows, failures = [], []
    start = time.time()
    end = start + args.minutes * 60
    reloads, down_since, last_rotate, last_received = 0, None, start, 0
    print(f"soak: {args.minutes} min, {args.clients} clients, ~{args.rate} msg/s; work {work}", flush=True)
    try:
        while time.time() < end:
            time.sleep(args.sample)
            now = time.time() - start
            # The receiver: away for 40 s every 3 minutes (by default).
            away = args.cycle * 2 / 9
            if down_since is None and args.cycle - away - 20 <= int(now) % args.cycle < args.cycle - 20:
                receiver.stop()
                down_since = now
            elif down_since is not None and now - down_since >= away:
                receiver.start()
                down_since = None
            # A reload every 3 minutes (by default), with the other template.
            if now // args.cycle > reloads:
                reloads += 1
                write_config(reloads)
                code, text = ctl(work, "reload")
                if code != 0:
                    failures.append(f"reload at {now:.0f}s: {text.strip()}")
            # logrotate every minute: files removed, then reopened.
            if time.time() - last_rotate >= 60:
                last_rotate = time.time()
                for name in os.listdir(os.path.join(work, "out")):
                    os.remove(os.path.join(work, "out", name))
                ctl(work, "reopen")
            rss, threads = proc_status(proc.pid)
            fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
            received = counter(work, "center.received.processed")
            code, ledger = ctl(work, "ledger")
            _, stats = ctl(work, "stats")
            row = {"t": round(now), "rss_mib": round(rss, 1), "fds": fds, "threads": threads,
                   "rate": round((received - last_received) / args.sample), "received": received,
                   "queued": counter(work, "dst.*.queued"), "balanced": int(code == 0),
                   "sink_up": int(receiver.up), "counters": stats.count("\n")}
            last_received = received
            rows.append(row)
            if code != 0:
                failures.append(f"books at {now:.0f}s:\n{ledger}")
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        # The end: no more load, the receiver up, everything delivered or accounted for.
        load.stop.set()
        if not receiver.up:
            receiver.start()
        time.sleep(15)
        code, ledger = ctl(work, "ledger")
        print(ledger, flush=True)
        if code != 0:
            failures.append(f"books at the end:\n{ledger}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    with open(os.path.join(out_dir, "samples.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(rows, os.path.join(out_dir, "soak.png"))
    warm = [r for r in rows if r["t"] >= args.minutes * 60 / 5]
    if len(warm) >= 3:
        mean = sum(r["rss_mib"] for r in warm) / len(warm)
        slope = slope_per_hour([r["t"] for r in warm], [r["rss_mib"] for r in warm])
        print(f"resident memory after warm-up: mean {mean:.1f} MiB, min {min(r['rss_mib'] for r in warm)}, "
              f"max {max(r['rss_mib'] for r in warm)}, trend {slope:+.2f} MiB/hour "
              f"(bar: under {0.05 * mean:.2f})")
        # For the reader: the same fit over the samples where nothing waits for the receiver
        # (the outages swing memory by a disk buffer's cache).
        calm = [r for r in warm if r["sink_up"] and r["queued"] < 100]
        if len(calm) >= 3:
            print(f"  between outages ({len(calm)} samples): trend "
                  f"{slope_per_hour([r['t'] for r in calm], [r['rss_mib'] for r in calm]):+.2f} MiB/hour")
        if slope > 0.05 * mean:
            failures.append(f"resident memory grows {slope:+.2f} MiB an hour after warm-up")
    print(f"sent {load.sent} messages, {receiver.lines} lines reached the receiver, "
          f"{len(rows)} samples, {sum(r['balanced'] for r in rows)} balanced; plots in {out_dir}")
    shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("FAILED:\n" + "\n".join(failures))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
