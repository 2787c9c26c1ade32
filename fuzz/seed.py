#!/usr/bin/env python3
"""Writes seed inputs for the fuzz targets from the project's tricky test lines.

The first byte of a `syslog` input selects parser flags (bit 7: RFC5424); a `stamps` input is a
frame as it is; the first byte of a `framing` input selects framing, trimming and the size limit.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")


def main():
    lines = []
    for name in ("tricky-rfc3164.log", "tricky-rfc5424.log"):
        with open(os.path.join(DATA, name), "rb") as f:
            lines += [l for l in f.read().split(b"\n") if l]
    for target in ("syslog", "stamps", "framing", "config"):
        os.makedirs(os.path.join(HERE, "corpus", target), exist_ok=True)
    for i, line in enumerate(lines):
        for flags in (0x01, 0x81, 0x45):
            with open(os.path.join(HERE, "corpus", "syslog", f"seed-{i}-{flags}"), "wb") as f:
                f.write(bytes([flags]) + line)
        with open(os.path.join(HERE, "corpus", "stamps", f"seed-{i}"), "wb") as f:
            f.write(line)
        with open(os.path.join(HERE, "corpus", "framing", f"seed-{i}"), "wb") as f:
            f.write(bytes([i % 256]) + line + b"\n" + f"{len(line)} ".encode() + line)
    with open(os.path.join(HERE, "corpus", "config", "seed-0"), "wb") as f:
        f.write(b'@version: 3.38\nsource s { network(port(514) flags(no-parse)); };\n'
                b'destination d { file("/x/$HOST" template("$MSG\\n")); };\n'
                b'filter f { facility(kern) and not level(debug..info); };\n'
                b'log { source(s); filter(f); destination(d); flags(final); };\n')
    print(f"seeded {len(lines)} lines")


if __name__ == "__main__":
    main()
