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
    # Secrets `sluice ctl config` hides: a password option, a secret pair, a URI's password.
    with open(os.path.join(HERE, "corpus", "config", "seed-secrets"), "wb") as f:
        f.write(b'destination d { sql(type(pgsql) username("u") password("p\\"w")); };\n'
                b'destination k { kafka-c(config("sasl.password" => "k")); };\n'
                b'destination m { mongodb(uri("mongodb://u:s@h:1/db?x=1")); };\n')
    seed_bounds()
    seed_archives(lines)
    print(f"seeded {len(lines)} lines")


def write(target, name, data):
    os.makedirs(os.path.join(HERE, "corpus", target), exist_ok=True)
    with open(os.path.join(HERE, "corpus", target, name), "wb") as f:
        f.write(data)


def seed_bounds():
    """Inputs at the bounds of the configuration and pattern database readers: nesting just
    within and just past them, a definition that quadruples itself, a declared entity, so that
    the fuzzer starts where the refusals are."""
    for n in (250, 260):
        write("config", f"seed-parens-{n}",
              b"filter f { " + b"(" * n + b'program("a")' + b")" * n + b" };\n")
        write("config", f"seed-log-{n}",
              b"log { " + b"log { " * n + b"flags(final); " + b"}; " * n + b"};\n")
        write("config", f"seed-calls-{n}",
              b'destination d { file("/x" template("' + b"$(echo " * (n // 4) + b"x"
              + b")" * (n // 4) + b'")); };\n')
    bomb = [b'@define a0 "xxxxxxxxxxxxxxxx"']
    bomb += [f'@define a{i} "`a{i-1}``a{i-1}``a{i-1}``a{i-1}`"'.encode() for i in range(1, 12)]
    write("config", "seed-define-bomb", b"\n".join(bomb) + b"\nsource s { file(`a11`); };\n")
    rule = (b"<patterndb version='4'><ruleset name='r' id='r'><patterns><pattern>app</pattern>"
            b"</patterns><rules><rule id='x' class='system' provider='p'><patterns>"
            b"<pattern>user @ESTRING:user: @logged in</pattern></patterns>"
            b"<examples><example><test_message program='app'>user a logged in</test_message>"
            b"</example></examples><values><value name='u'>$user</value></values>"
            b"<tags><tag>login</tag></tags></rule></rules></ruleset></patterndb>")
    write("patterndb_xml", "seed-rule", rule)
    write("patterndb_xml", "seed-deep",
          rule.replace(b"<tag>login</tag>", b"<tag>" + b"<x>" * 3000 + b"</x>" * 3000 + b"</tag>"))
    write("patterndb_xml", "seed-entity",
          b"<!DOCTYPE patterndb [<!ENTITY e 'login'>]>" + rule.replace(b"login</tag>", b"&e;</tag>"))


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
