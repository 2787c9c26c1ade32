#!/usr/bin/env python3
"""Writes a pattern database for the db-parser() benchmark from a corpus of syslog lines.

usage: bench/patterndb.py CORPUS OUT.xml [--patterns N] [--match PERCENT]

Each line's message is given a shape — its first five words, a word of digits as @NUMBER@, a
word with digits in it as @ESTRING@, the rest as @ANYSTRING@ — and the most frequent shapes
of each program become rules (a ruleset per program) until they cover PERCENT of the lines;
rules that match nothing (shapes of words no line has) fill the database up to N rules, so
that the tree is as large as a site's. Prints how many lines the chosen rules cover.
"""
import argparse
import collections
import re
from xml.sax.saxutils import escape

LINE = re.compile(r"^<\d+>\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ ([^:\[ ]+)(?:\[\d+\])?: ?(.*)$")


def shape(message):
    words = message.split(" ")
    out = []
    for i, w in enumerate(words[:5]):
        last = i == len(words) - 1
        if w.isdigit() and w:
            out.append("@NUMBER:n%d@" % i + ("" if last else " "))
        elif any(c.isdigit() for c in w) and not last:
            out.append("@ESTRING:e%d: @" % i)
        elif any(c.isdigit() for c in w):
            out.append("@ANYSTRING:tail@")
        else:
            out.append(w.replace("@", "@@") + ("" if last else " "))
    if len(words) > 5:
        out.append("@ANYSTRING:rest@")
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--patterns", type=int, default=1000)
    ap.add_argument("--match", type=float, default=10.0)
    args = ap.parse_args()
    lines = open(args.corpus, encoding="utf-8", errors="replace").read().splitlines()
    shapes = collections.Counter()
    total = 0
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        total += 1
        shapes[(m[1], shape(m[2]))] += 1
    chosen, covered = [], 0
    for (program, pattern), n in shapes.most_common():
        if covered >= total * args.match / 100 or len(chosen) >= args.patterns:
            break
        # Skip a shape that would take the coverage far past the target.
        if covered + n > total * args.match / 100 * 1.5 and chosen:
            continue
        chosen.append((program, pattern))
        covered += n
    programs = sorted({p for p, _ in shapes})
    filler = [(programs[i % len(programs)], "never seen %d @NUMBER:x@ words @ANYSTRING:rest@" % i)
              for i in range(args.patterns - len(chosen))]
    by_program = collections.defaultdict(list)
    for program, pattern in chosen + filler:
        by_program[program].append(pattern)
    with open(args.out, "w") as f:
        f.write("<?xml version='1.0' encoding='UTF-8'?>\n<patterndb version='4' pub_date='2026-11-25'>\n")
        rule = 0
        for program, patterns in sorted(by_program.items()):
            f.write(f" <ruleset name='{escape(program)}' id='rs-{escape(program)}'>\n")
            f.write(f"  <pattern>{escape(program)}</pattern>\n  <rules>\n")
            for p in patterns:
                rule += 1
                f.write(f"   <rule id='r{rule}' class='c{rule % 7}'><patterns><pattern>{escape(p)}</pattern></patterns>"
                        f"<tags><tag>t{rule % 5}</tag></tags></rule>\n")
            f.write("  </rules>\n </ruleset>\n")
        f.write("</patterndb>\n")
    print(f"{len(chosen) + len(filler)} rules ({len(chosen)} from the corpus) in {len(by_program)} rulesets; "
          f"they cover {covered} of {total} lines ({covered / total:.1%})")


if __name__ == "__main__":
    main()
