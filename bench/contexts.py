#!/usr/bin/env python3
"""Writes a pattern database that opens a correlation context for every message of
`sluice loggen` (keyed by its connection and sequence number), for the benchmark of memory
with many open contexts.

usage: bench/contexts.py OUT.xml [--timeout SECONDS]

    bench/contexts.py /tmp/contexts.xml
    bench/run.py --patterndb /tmp/contexts.xml --max-contexts 2000000 --count 1000000 \
        --rounds 1 --servers sluice,syslog-ng

The rule also has a timeout action (a summary of each context), as a correlating rule has;
the timeout (an hour by default) keeps every context open for the run.
"""
import argparse

DATABASE = """<?xml version='1.0' encoding='UTF-8'?>
<patterndb version='4' pub_date='2026-01-01'>
  <ruleset name='loggen' id='loggen'>
    <rules>
      <rule provider='bench' id='loggen-message' class='system' context-scope='global'
            context-id='${{thread}}-${{seq}}' context-timeout='{timeout}'>
        <patterns><pattern>seq: @NUMBER:seq@, thread: @NUMBER:thread@, runid: @ANYSTRING:rest@</pattern></patterns>
        <actions>
          <action trigger='timeout'>
            <message><values><value name='MESSAGE'>context ${{thread}}-${{seq}} ended after $(context-length)</value></values></message>
          </action>
        </actions>
      </rule>
    </rules>
  </ruleset>
</patterndb>
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--timeout", type=int, default=3600)
    args = ap.parse_args()
    with open(args.out, "w") as f:
        f.write(DATABASE.format(timeout=args.timeout))


if __name__ == "__main__":
    main()
