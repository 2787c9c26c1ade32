"""What the benchmarks of destinations that feed another system share (bench/kafka.py,
bench/opensearch.py): a shipper (sluice or syslog-ng) reading 300-byte messages from 4 TCP
connections on a flow-controlled path into one destination, rounds in which each mode comes
first once, and the table of medians. Imported, not run."""

import os
import resource
import shutil
import statistics
import subprocess
import time

import run


def start_shipper(mode, work, destination, defaults=False):
    """Starts `mode` (sluice or syslog-ng) reading TCP into `destination`; returns it and its
    port. Tuned (a window of a million, `threaded(yes)`, a large queue), or with `defaults`
    as a user writes it: no option but the port."""
    port = run.free_port()
    conf = os.path.join(work, "server.conf")
    if defaults:
        options = "stats-freq(0);"
        source = f"network(ip(127.0.0.1) port({port}) transport(tcp))"
    else:
        options = "threaded(yes); log-fifo-size(1000000); use-dns(no); keep-hostname(yes); stats-freq(0);"
        source = (f"network(ip(127.0.0.1) port({port}) transport(tcp) log-iw-size(1000000) "
                  f"log-fetch-limit(1000))")
    open(conf, "w").write(f"""@version: 3.38
@include "scl.conf"
options {{ {options} }};
source s {{ {source}; }};
destination d {{ {destination}; }};
log {{ source(s); destination(d); flags(flow-control); }};
""")
    server = run.SLUICE if mode == "sluice" else "syslog-ng"
    extra = ["--no-caps"] if mode == "syslog-ng" else []
    proc = subprocess.Popen([server, "-F", *extra, "-f", conf, "-R", f"{work}/persist", "-p", f"{work}/pid",
                             "-c", f"{work}/ctl"], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "stderr"), "w"))
    run.wait_port(port)
    time.sleep(0.5)
    return proc, port


def loggen_message(i):
    """The message part of `sluice loggen -S -s 300`'s line number `i` (249 bytes)."""
    return f"seq: {i:010d}, thread: 0000, runid: 1700000000, stamp: 2026-11-24T13:50:17 {'PADD' * 80}"[:249]


def loggen_line(i):
    """`sluice loggen -S -s 300`'s line number `i`, 300 bytes with its header."""
    return f"2026-11-24T13:50:17+00:00 localhost prg00000[1234]: {loggen_message(i)}"[:300]


def cpu_until_exit(proc):
    """Waits for `proc` to exit; the CPU seconds it had used when last seen."""
    cpu = 0.0
    while proc.poll() is None:
        try:
            cpu = run.cpu_seconds(proc.pid)
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.05)
    return cpu


def stop_service(proc, directory, wait):
    """Stops a service started for a benchmark (a JVM), killing it after `wait` seconds, and
    removes its directory."""
    proc.terminate()
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(directory, ignore_errors=True)


def stop_shipper(proc, work):
    """Stops the shipper; the end of what it said."""
    proc.terminate()
    proc.wait(60)
    path = os.path.join(work, "stderr")
    return open(path).read()[-int(os.environ.get("SHIPPER_TAIL", "500")):] if os.path.exists(path) else ""


def send_load(port, total):
    """`total` messages of 300 bytes over 4 TCP connections, as syslog-ng's `loggen -S`;
    returns the CPU seconds the load generator took (a ceiling that reads a file has none)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([run.SLUICE, "loggen", "-S", "-s", "300", "-r", "0", "-I", "3600",
                    "-n", str(total // 4), "--active-connections", "4", "127.0.0.1", str(port)],
                   capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def wait_count(count, want, proc=None):
    """Waits until `count()` reaches `want`, none came for 30 s, or the shipper `proc` died;
    returns the count and when it last grew."""
    last, grew = -1, time.time()
    while True:
        n = count()
        if n != last:
            last, grew = n, time.time()
        if n >= want or time.time() - grew > 30 or (proc is not None and proc.poll() is not None):
            return n, grew
        time.sleep(0.1)


def rounds(modes, count, run_once):
    """`run_once(mode, round)` for each mode in `count` rounds, each mode first in one: a JVM
    that still warms up favours whoever comes last. The results by mode."""
    results = {m: [] for m in modes}
    for r in range(count):
        print(f"round {r + 1}", flush=True)
        for m in modes[r % len(modes):] + modes[:r % len(modes)]:
            results[m].append(run_once(m, r))
    return results


def print_medians(results, unit, server, ceiling, bar, also=()):
    """The medians of (rate, shipper CPU, server CPU) by mode; sluice against `ceiling` (and
    the modes in `also`) and against syslog-ng's CPU."""
    print(f"\n{'mode':<16} {unit + '/s':>10} {'shipper CPU us/' + unit:>19} {server + ' CPU us/' + unit:>19}")
    med = {}
    for m, rows in results.items():
        med[m] = tuple(statistics.median(x[i] for x in rows) for i in range(3))
        print(f"{m:<16} {med[m][0]:>10,.0f} {med[m][1]:>19.2f} {med[m][2]:>19.1f}")
    ours = med.get("sluice")
    if ours and med.get(ceiling, (0,))[0] > 0:
        print(f"sluice / {ceiling}: {ours[0] / med[ceiling][0]:.1%} of the rate (bar {bar})")
    for other in also:
        if ours and med.get(other, (0,))[0] > 0:
            print(f"sluice / {other}: {ours[0] / med[other][0]:.1%} of the rate, "
                  f"{ours[1] / med[other][1]:.2f} of its CPU per {unit}")
    if ours and med.get("syslog-ng", (0, 0))[1] > 0:
        print(f"sluice / syslog-ng: {ours[0] / med['syslog-ng'][0]:.2f}x the rate, "
              f"{ours[1] / med['syslog-ng'][1]:.2f} of the CPU per {unit} (bar 0.2)")
