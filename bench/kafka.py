#!/usr/bin/env python3
"""kafka-c() into a Kafka broker: sluice against syslog-ng 3.38, beside `kcat -P` (librdkafka
alone, reading a file), on one broker started here.

usage: bench/kafka.py [--count N] [--rounds N] [--partitions N] [--warmup N] [--no-build]

Starts Kafka 3.9 in KRaft mode (one node, 1 GiB heap) from the jars .ci/install-test-deps.sh
fetched, then each round runs on a fresh topic (`--partitions`, default 1), each mode first in
turn, after `--warmup` records (8,000,000 unless told) warmed the broker's JVM up:
  kcat       `kcat -P -l FILE` of the same 300-byte lines, made before the clock starts (what
             the broker takes from librdkafka when the shipper costs nothing),
  kcat-idempotent  the same with `-X enable.idempotence=true`, as sluice's kafka-c() produces
             (librdkafka's idempotent producer; with the broker warm it costs kcat a sixth
             more CPU per record),
  syslog-ng  syslog-ng 3.38's kafka-c() (Debian's syslog-ng-mod-rdkafka),
  sluice     sluice's kafka-c() with the same options,
the servers fed 300-byte messages over 4 TCP connections by `sluice loggen -S -s 300` on a
flow-controlled path. A run ends when the topic's end offsets (`kcat -Q`) add up to the count.
The servers run tuned (a window of a million messages, `threaded(yes)`), or with --defaults as
a user writes them: a `network()` source with no option but its port.

Prints msg/s and the shipper's CPU µs per record (kcat's own for its row; the broker's and the
load generator's beside them: the servers share two cores with both, kcat with the broker only),
the medians, sluice against kcat (the issue's 80 % bar) and against syslog-ng's CPU (its 1/5
bar), then round by round the rate the cores would allow sluice and kcat at the CPU a record
their runs took (shipper, load generator and broker together), and the ratio of the two: the
rate bar this machine allows when nothing waits. Needs kcat (`apt-get install kcat`).

With --consume, the other way: each round fills a fresh topic with the lines (`kcat -P`), then
  kcat-consume    `kcat -G` (a consumer group member) reads them all to /dev/null,
  sluice-consume  sluice's kafka() source in a group of its own reads them, parses each as
                  syslog and writes a byte per message to a file,
timed from the first record read to the last (the group's join is left out).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import downstream  # noqa: E402  (what bench/opensearch.py does alike)
import run  # noqa: E402  (the shared helpers of bench/run.py)

LIB = "/opt/sluice-test/kafka/lib"
MODES = ["kcat", "kcat-idempotent", "syslog-ng", "sluice"]


class Broker:
    """One KRaft broker and controller in a directory of its own."""

    def __init__(self, partitions):
        self.dir = tempfile.mkdtemp(prefix="sluice-bench-kafka-")
        port, controller = run.free_port(), run.free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        props = os.path.join(self.dir, "server.properties")
        open(props, "w").write(
            f"process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{controller}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"log.dirs={self.dir}/data\nnum.partitions={partitions}\nauto.create.topics.enable=true\n"
            "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n")
        log4j = os.path.join(self.dir, "log4j.properties")
        open(log4j, "w").write(
            "log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
        self.java = ["java", f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{LIB}/*"]
        subprocess.run([*self.java, "-Xmx256m", "kafka.tools.StorageTool", "format", "-t", "sluice-bench-kraft-01",
                        "-c", props], check=True, capture_output=True)
        self.proc = subprocess.Popen([*self.java, "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "kafka.Kafka", props],
                                     stdout=open(os.path.join(self.dir, "kafka.out"), "w"), stderr=subprocess.STDOUT)
        started = time.time()
        while subprocess.run(["kcat", "-b", self.bootstrap, "-L", "-m", "2"], capture_output=True).returncode != 0:
            if self.proc.poll() is not None or time.time() - started > 180:
                raise SystemExit("Kafka did not start:\n" + open(os.path.join(self.dir, "kafka.out")).read()[-2000:])
            time.sleep(0.5)

    def create_topic(self, topic):
        """Made by the broker (`auto.create.topics.enable`, `--partitions` of them) when kcat
        asks for its metadata; waits until it has leaders."""
        started = time.time()
        while "leader 1" not in subprocess.run(["kcat", "-b", self.bootstrap, "-L", "-t", topic],
                                               capture_output=True, text=True).stdout:
            if time.time() - started > 60:
                raise SystemExit(f"the broker did not make topic {topic}")
            time.sleep(0.3)

    def end_offsets(self, topic, partitions):
        args = [a for p in range(partitions) for a in ("-t", f"{topic}:{p}:-1")]
        out = subprocess.run(["kcat", "-b", self.bootstrap, "-Q", *args], capture_output=True, text=True).stdout
        words = out.split()
        return sum(int(words[i + 1]) for i, w in enumerate(words) if w == "offset")

    def stop(self):
        downstream.stop_service(self.proc, self.dir, 60)


def write_lines(path, total):
    """The benchmark's 300-byte lines, as loggen -S sends them."""
    with open(path, "w") as f:
        for i in range(total):
            f.write(downstream.loggen_line(i) + "\n")


def consume_once(mode, broker, args, round_no):
    """One --consume run of `mode`: (rate, consumer CPU per record, broker CPU per record)."""
    topic = f"in{mode.replace('-', '')}{round_no}"
    broker.create_topic(topic)
    work = tempfile.mkdtemp(prefix=f"sluice-bench-{mode}-")
    total = args.count
    proc = None
    try:
        lines = os.path.join(work, "lines")
        write_lines(lines, total)
        subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-l", lines], check=True)
        downstream.wait_count(lambda: broker.end_offsets(topic, args.partitions), total)
        group = f"bench-{topic}"
        broker_cpu0 = run.cpu_seconds(broker.proc.pid)
        if mode == "kcat-consume":
            t0 = time.time()
            proc = subprocess.Popen(["kcat", "-b", broker.bootstrap, "-G", group, "-o", "beginning", "-c",
                                     str(total), "-q", "-X", "auto.offset.reset=earliest", topic],
                                    stdout=subprocess.DEVNULL)
            cpu = downstream.cpu_until_exit(proc)
            got, t1 = total, time.time()
            proc = None
        else:
            out = os.path.join(work, "out")
            conf = os.path.join(work, "server.conf")
            open(conf, "w").write(f"""@version: 3.38
options {{ stats-freq(0); }};
source s {{ kafka(bootstrap-servers("{broker.bootstrap}") topic("{topic}") log-iw-size(100000)
    config("group.id" => "{group}") {args.options}); }};
destination d {{ file("{out}" template("x")); }};
log {{ source(s); destination(d); }};
""")
            proc = subprocess.Popen([run.SLUICE, "-F", "-f", conf, "-R", f"{work}/persist", "-p", f"{work}/pid",
                                     "-c", f"{work}/ctl"], stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(work, "stderr"), "w"))
            size = lambda: os.path.getsize(out) if os.path.exists(out) else 0  # noqa: E731
            while size() == 0 and proc.poll() is None:
                time.sleep(0.01)
            t0, first = time.time(), size()
            got, t1 = downstream.wait_count(size, total, proc)
            cpu = run.cpu_seconds(proc.pid)
            total -= first
        broker_cpu = 1e6 * (run.cpu_seconds(broker.proc.pid) - broker_cpu0) / args.count
        cpu = 1e6 * cpu / args.count
    finally:
        err = downstream.stop_shipper(proc, work) if proc is not None else ""
        shutil.rmtree(work, ignore_errors=True)
    note = "" if got >= args.count else f"  INCOMPLETE: {got} of {args.count}\n{err}"
    rate = total / (t1 - t0) if not note else 0.0
    print(f"{mode:15s} count={args.count} wall={t1 - t0:.2f}s rate={rate:,.0f} msg/s consumer-cpu={cpu:.2f} us/msg "
          f"broker-cpu={broker_cpu:.1f} us/msg{note}", flush=True)
    return rate, cpu, broker_cpu


def warm_up(broker, count, partitions):
    """`count` records through `kcat -P` into a topic of their own before the first round,
    half of them idempotent (as sluice's producer is): a broker JVM that is still compiling
    favours whoever comes later (the first round's broker CPU per record was ~2 µs against
    the ~0.8 of the rest; after 2,000,000 records it still fell from 1.2 µs in the first
    round to 0.5 in the third)."""
    if count <= 0:
        return
    broker.create_topic("warmup")
    work = tempfile.mkdtemp(prefix="sluice-bench-warmup-")
    try:
        lines = os.path.join(work, "lines")
        write_lines(lines, count // 2)
        for extra in ([], ["-X", "enable.idempotence=true"]):
            subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", "warmup", "-l", lines, *extra], check=True)
        downstream.wait_count(lambda: broker.end_offsets("warmup", partitions), 2 * (count // 2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"warmed the broker up with {2 * (count // 2):,} records", flush=True)


def run_once(mode, broker, args, round_no):
    topic = f"{mode.replace('-', '')}-{round_no}"
    broker.create_topic(topic)
    work = tempfile.mkdtemp(prefix=f"sluice-bench-{mode}-")
    total = 4 * (args.count // 4)
    proc, loader = None, 0.0
    try:
        if mode.startswith("kcat"):
            lines = os.path.join(work, "lines")
            write_lines(lines, total)
            broker_cpu0, t0 = run.cpu_seconds(broker.proc.pid), time.time()
            idempotent = ["-X", "enable.idempotence=true"] if mode == "kcat-idempotent" else []
            kcat = subprocess.Popen(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-l", lines, *idempotent])
            pid_cpu = downstream.cpu_until_exit(kcat)
            got, t1 = downstream.wait_count(lambda: broker.end_offsets(topic, args.partitions), total)
            cpu = 1e6 * pid_cpu / total
        else:
            proc, port = downstream.start_shipper(
                mode, work, f'kafka-c(bootstrap-servers("{broker.bootstrap}") topic("{topic}") {args.options})',
                defaults=args.defaults)
            broker_cpu0, cpu0, t0 = run.cpu_seconds(broker.proc.pid), run.cpu_seconds(proc.pid), time.time()
            loader = 1e6 * downstream.send_load(port, total) / total
            got, t1 = downstream.wait_count(lambda: broker.end_offsets(topic, args.partitions), total, proc)
            cpu = 1e6 * (run.cpu_seconds(proc.pid) - cpu0) / total
        broker_cpu = 1e6 * (run.cpu_seconds(broker.proc.pid) - broker_cpu0) / total
    finally:
        err = downstream.stop_shipper(proc, work) if proc is not None else ""
        shutil.rmtree(work, ignore_errors=True)
    note = "" if got == total else f"  INCOMPLETE: {got} of {total}\n{err}"
    rate = total / (t1 - t0) if not note else 0.0
    print(f"{mode:10s} count={total} wall={t1 - t0:.2f}s rate={rate:,.0f} msg/s shipper-cpu={cpu:.2f} us/msg "
          f"broker-cpu={broker_cpu:.1f} us/msg loader-cpu={loader:.2f} us/msg{note}", flush=True)
    return rate, cpu, broker_cpu, loader


def print_cpu_ceilings(results):
    """Round by round, the rate the machine's cores allow sluice and kcat: all of them busy,
    at the CPU a record each run took (the shipper's, the load generator's, the broker's).
    Their ratio is what the rate bar can be on this machine when nothing waits."""
    ours, theirs = results.get("sluice"), results.get("kcat")
    if not ours or not theirs:
        return
    cores = os.cpu_count()
    print(f"\nwhat {cores} cores allow at each run's CPU a record (shipper + load generator + broker):")
    ratios = []
    for r, (a, b) in enumerate(zip(ours, theirs)):
        sluice_us, kcat_us = a[1] + a[3] + a[2], b[1] + b[3] + b[2]
        if sluice_us <= 0 or kcat_us <= 0:
            continue
        ratios.append(kcat_us / sluice_us)
        print(f"round {r + 1}: sluice {sluice_us:.2f} us a record -> {cores * 1e6 / sluice_us:,.0f} msg/s "
              f"(ran at {a[0] / (cores * 1e6 / sluice_us):.0%} of it); kcat {kcat_us:.2f} -> "
              f"{cores * 1e6 / kcat_us:,.0f} (ran at {b[0] / (cores * 1e6 / kcat_us):.0%}); "
              f"sluice's ceiling {ratios[-1]:.1%} of kcat's")
    if ratios:
        print(f"sluice's CPU ceiling / kcat's, median: {statistics.median(ratios):.1%}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--options", default="",
                   help="more kafka-c() options, for both servers (with --consume: kafka() source options)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--consume", action="store_true", help="time the kafka() source instead")
    p.add_argument("--defaults", action="store_true",
                   help="the servers at the defaults a user writes (no window, queue or thread options)")
    p.add_argument("--warmup", type=int, default=8_000_000,
                   help="records produced before the first round, not measured (0: none)")
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()
    if args.consume and args.modes == ",".join(MODES):
        args.modes = "kcat-consume,sluice-consume"
    if not os.path.exists(os.path.join(LIB, ".done")):
        raise SystemExit(f"{LIB} is missing: run .ci/install-test-deps.sh")
    if shutil.which("kcat") is None:
        raise SystemExit("kcat is missing: apt-get install kcat")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=run.ROOT, check=True)
    modes = [m for m in args.modes.split(",") if m]
    if "syslog-ng" in modes and not os.path.exists("/usr/lib/syslog-ng/3.38/libkafka.so"):
        modes.remove("syslog-ng")
        print("syslog-ng's kafka-c() (syslog-ng-mod-rdkafka) is not installed: left out")
    broker = Broker(args.partitions)
    try:
        warm_up(broker, args.warmup, args.partitions)
        once = consume_once if args.consume else run_once
        results = downstream.rounds(modes, args.rounds, lambda m, r: once(m, broker, args, r))
    finally:
        broker.stop()
    if args.consume:
        downstream.print_medians(results, "msg", "broker", "", "", also=[])
        ours, theirs = results.get("sluice-consume"), results.get("kcat-consume")
        if ours and theirs:
            import statistics
            a, b = statistics.median(r[0] for r in ours), statistics.median(r[0] for r in theirs)
            if b > 0:
                print(f"sluice-consume / kcat-consume: {a / b:.1%} of the rate")
        return
    downstream.print_medians(results, "msg", "broker", "kcat", "80 %", also=["kcat-idempotent"])
    print_cpu_ceilings(results)


if __name__ == "__main__":
    main()
