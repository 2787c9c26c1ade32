#!/usr/bin/env python3
"""Writes a corpus of RFC3164 lines for the benchmarks' `--corpus`, for a clone that has no
`../shared/corpus` (the loghub samples the project's figures were measured on).

    python3 bench/corpus.py > /tmp/corpus.log                 # 32,000 lines, 735 hosts
    python3 bench/corpus.py --lines 100000 --hosts 50 > x.log

The lines have the loghub corpus's shape, not its text: `<PRI>Mmm dd hh:mm:ss host
program[pid]: message`, many hosts (so that `--per-host` makes many files) and programs,
messages of 20 to 400 bytes with numbers, addresses, paths and key=value pairs in them. The
same arguments give the same file (a fixed seed).
"""

import argparse
import random
import sys

PROGRAMS = ["sshd", "kernel", "CRON", "su", "dhcpd", "nginx", "hdfs.DataNode", "spark.executor",
            "postfix/smtpd", "systemd", "ntpd", "sudo", "zookeeper", "openstack.nova", "apache2"]
WORDS = ("accepted failed connection from user session opened closed for block received "
         "replica of size bytes request took ms error warning info retry timeout disk write "
         "read task finished started executor heartbeat lost registered authentication").split()
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def message(rng):
    parts = []
    while sum(len(p) + 1 for p in parts) < rng.choice([20, 40, 60, 90, 120, 200, 400]):
        kind = rng.random()
        if kind < 0.55:
            parts.append(rng.choice(WORDS))
        elif kind < 0.7:
            parts.append(str(rng.randrange(1 << rng.choice([4, 10, 20, 32]))))
        elif kind < 0.8:
            parts.append(".".join(str(rng.randrange(256)) for _ in range(4)) + f":{rng.randrange(1024, 65536)}")
        elif kind < 0.9:
            parts.append("/" + "/".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 5))))
        else:
            parts.append(f"{rng.choice(WORDS)}={rng.randrange(100000)}")
    return " ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=32_000)
    ap.add_argument("--hosts", type=int, default=735)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    hosts = [f"{rng.choice(['node', 'web', 'db', 'fw', 'dn', 'app'])}-{n:04d}" for n in range(args.hosts)]
    out = sys.stdout
    for n in range(args.lines):
        pri = rng.choice([13, 14, 30, 38, 86, 3, 4, 11])
        stamp = f"{MONTHS[n * 12 // args.lines]} {1 + n % 28:2d} {n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}"
        out.write(f"<{pri}>{stamp} {rng.choice(hosts)} {rng.choice(PROGRAMS)}[{rng.randrange(1, 32768)}]: {message(rng)}\n")


if __name__ == "__main__":
    main()
