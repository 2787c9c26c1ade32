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
    seed_archives(lines)
    print(f"seeded {len(lines)} lines")


def seed_archives(lines):
    """Unencrypted archives of the tricky lines, written by sluice itself (a `stdin()` source
    into `logstore()`, compressed and not, in small chunks), so that the fuzzer starts from
    frames whose indexes and records it can reach."""
    import shutil
    import subprocess
    import tempfile

    root = os.path.join(HERE, "..")
    sluice = os.path.join(root, "target", "release", "sluice")
    if not os.path.exists(sluice):
        sluice = os.path.join(root, "target", "debug", "sluice")
    if not os.path.exists(sluice):
        print("no sluice binary (cargo build): logstore seeds left out")
        return
    out = os.path.join(HERE, "corpus", "logstore")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp()
    for level in (0, 3):
        archive = os.path.join(out, f"seed-compress-{level}.lgs")
        if os.path.exists(archive):
            os.remove(archive)
        conf = os.path.join(work, "s.conf")
        with open(conf, "w") as f:
            f.write(f'@version: 3.38\nsource s {{ stdin(); }};\n'
                    f'destination d {{ logstore("{archive}" compress({level}) chunk-size(4096)); }};\n'
                    f'log {{ source(s); destination(d); }};\n')
        subprocess.run([sluice, "-F", "-f", conf, "-R", os.path.join(work, "persist"), "-c",
                        os.path.join(work, "ctl")], input=b"\n".join(lines) + b"\n", check=True,
                       capture_output=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
