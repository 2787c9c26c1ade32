#!/usr/bin/env python3
"""Runs every test binary of the workspace, as `cargo test --workspace --all-targets` does,
but several at a time: the end-to-end binaries spend most of their time waiting on sockets,
services and sluice processes, so two cores run two or three of them side by side.

    python3 .ci/test.py               # build once, run every binary, the slowest first
    python3 .ci/test.py -j 1          # one binary at a time, as `cargo test` runs them
    python3 .ci/test.py downstream    # only the binaries whose name holds a word given

Each binary runs as cargo runs it (in its package's directory, with cargo's variables); its
output is printed whole when it ends, so the log reads binary by binary. The run fails when
one binary fails. The last lines say how long each binary took and `N passed, N failed`.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

# The binaries known to take longest (seconds on two cores, `.ci/run`): started first so
# that the run ends with the short ones. The rest follow in the order cargo lists them.
SLOW_FIRST = [
    "downstream",
    "differential",
    "hostile",
    "logstore",
    "files",
    "reload",
    "forwarding",
    "tls",
    "destinations",
    "relp",
    "clients",
]


def binaries(root):
    """Builds the test binaries and returns (name, executable, package dir) for each."""
    cmd = ["cargo", "test", "--workspace", "--all-targets", "--no-run", "--message-format=json-render-diagnostics"]
    out = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, check=True, text=True).stdout
    found = []
    for line in out.splitlines():
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
            continue
        kind = m["target"]["kind"][0]
        name = m["target"]["name"] if kind in ("test", "bench") else f"{m['target']['name']} ({kind})"
        found.append((name, m["executable"], os.path.dirname(m["manifest_path"])))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("SLUICE_TEST_JOBS", "2")))
    ap.add_argument("only", nargs="*", help="run only the binaries whose name holds one of these")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    started = time.monotonic()
    found = binaries(root)
    print(f"built {len(found)} test binaries in {time.monotonic() - started:.0f} s", flush=True)
    if args.only:
        found = [b for b in found if any(w in b[0] for w in args.only)]
    rank = {n: i for i, n in enumerate(SLOW_FIRST)}
    found.sort(key=lambda b: rank.get(b[0], len(rank)))

    env = dict(os.environ)
    env.setdefault("CARGO", "cargo")
    lock = threading.Lock()
    queue = list(found)
    results = []

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                name, exe, cwd = queue.pop(0)
            t0 = time.monotonic()
            with tempfile.TemporaryFile(mode="w+") as log:
                e = dict(env, CARGO_MANIFEST_DIR=cwd)
                code = subprocess.call([exe], cwd=cwd, env=e, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                took = time.monotonic() - t0
                log.seek(0)
                text = log.read()
            passed = sum(int(x) for x in re.findall(r"^test result: \w+\. (\d+) passed", text, re.M))
            failed = sum(int(x) for x in re.findall(r"^test result: \w+\. \d+ passed; (\d+) failed", text, re.M))
            if code != 0 and failed == 0:
                failed = 1  # it crashed, or a harness-less binary failed
            with lock:
                print(f"\n==> {name} ({took:.0f} s, exit {code})\n{text}", flush=True)
                results.append((name, took, code, passed, failed))

    threads = [threading.Thread(target=worker) for _ in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    print("\ntime by binary:")
    for name, took, code, passed, failed in sorted(results, key=lambda r: -r[1]):
        mark = "" if code == 0 else "  FAILED"
        print(f"  {took:7.1f} s  {name}{mark}")
    print(f"all binaries: {time.monotonic() - started:.0f} s with {args.jobs} at a time")
    passed = sum(r[3] for r in results)
    failed = sum(r[4] for r in results)
    print(f"{passed} passed, {failed} failed")
    bad = [r[0] for r in results if r[2] != 0]
    if bad:
        print("failed: " + ", ".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
