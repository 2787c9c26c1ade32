#!/usr/bin/env python3
"""The project's benchmark: sluice side by side with syslog-ng and rsyslog, in one run.

usage: bench/run.py [--conns N] [--count N] [--size BYTES] [--proto 3164|5424] [--rounds N]
                    [--rewrite subst|set|classify] [--patterndb FILE [--against-no-parser]]
                    [--format-json] [--corpus FILE] [--tls]
                    [--per-host] [--against-plain | --against-conns N | --against-one-file]
                    [--servers sluice,syslog-ng,rsyslog]
                    [--no-build]

Builds sluice in release mode, then for each server in turn (rounds alternate servers so that
drift in the machine's speed hits all alike): starts it with a TCP source and one file
destination — sluice and syslog-ng run the same syslog-ng configuration text, rsyslog its
equivalent — sends COUNT messages over CONNS connections with `sluice loggen` (unthrottled),
waits until the file holds them all, and records messages per second, the server's CPU time per
message and its peak resident memory. Servers that are not installed are left out with a note
(bench/README.md says how to install them). Prints a table of medians and the ratios.

`--rewrite` puts a rewrite rule in the path (sluice and syslog-ng only; rsyslog has no
equivalent in its configuration language and is left out): `subst` masks every run of digits in
the message, `set` sets a name-value pair from a template and writes it, `classify` labels each
message with ten `if`/`elif` rules. `--format-json` writes
each message as `$(format-json --scope rfc5424 --scope nv-pairs)` (sluice and syslog-ng only).

`--patterndb FILE` puts `db-parser(file(FILE))` in the path (sluice and syslog-ng only;
`bench/patterndb.py` writes one from a corpus with the share of lines that should match;
`bench/contexts.py` one that opens a correlation context per message, for which
`--max-contexts N` raises sluice's bound of open contexts).
`--against-no-parser` also runs each server without it just before, and prints the ratio per
round.

`--forward relp` forwards over RELP (`relp()` to a sluice `relp()` source; sluice only, as
syslog-ng has no RELP).

`--forward none|normal|reliable` benchmarks a relay instead (sluice and syslog-ng only): the
server under test forwards over TCP (`network()`, syslog-ng's wire format) on a flow-controlled
path, with no disk buffer or with a normal or reliable `disk-buffer()`, to a sluice that writes
the file; the rate is what reaches the file. The receiving sluice runs on the same two cores
for every server measured.

`--tls` makes the source TLS (`transport(tls)`, a self-signed certificate made with `openssl`;
rsyslog: `imtcp` with its OpenSSL driver) and `sluice loggen` connect with `-U`.

`--against-plain` (with `--tls`) and `--against-conns N` measure a ratio the way the issues state
their bars — TLS against plain TCP, CONNS connections against N — without the machine's drift in
it: every round runs each server both ways back to back, and the ratio of each round's pair is
printed with their median.

`--per-host` writes a file per host (`${HOST}.log`; rsyslog: a `dynaFile`) and needs `--corpus`
for its many hosts. The files are made by a first pass of the corpus over every connection
before the measured run, which then writes into files that exist — the steady state of a log
server. On this machine's ext4 without a journal, creating a file soon after others were
deleted costs about a millisecond of CPU (the inode allocator skips recently deleted inodes
one by one), so a run that starts with no files measures that more than the server: see
BENCHMARKS.md. `--against-one-file` (with `--per-host`) prints per host / one file per round.

`SLUICE_BIN=PATH` (with `--no-build`) runs that sluice binary instead of the release build: two
builds alternated compare a change.

`--corpus FILE` sends the lines of a file of syslog messages (such as
`../shared/corpus/loghub-rfc3164.log`), over and over, instead of `sluice loggen`'s synthetic
messages: servers run very differently on real lines of varied shape than on loggen's short,
regular ones.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# SLUICE_BIN benchmarks another build (with --no-build): two builds alternated, before and after.
SLUICE = os.environ.get("SLUICE_BIN") or os.path.join(ROOT, "target", "release", "sluice")
RSYSLOG = "/opt/rsyslog"
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def peak_rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _classify():
    """Ten if/elif rules that label each message, the kind of classification a central server
    does before routing."""
    rules = ['level(emerg)', 'program("sshd")', 'message("error" type(string) flags(substring))',
             'message("fail(ed|ure)")', 'facility(auth, authpriv)', 'host("fw*" type(glob))',
             'message("denied" type(string) flags(substring ignore-case))', 'program("^(cron|CRON)$")',
             'level(err..alert)', 'message("^seq: 0000000[0-4]")']
    arms = [f'{"if" if i == 0 else "elif"} ({r}) {{ rewrite {{ set("c{i}", value("cls")); }}; }}' for i, r in enumerate(rules)]
    return " ".join(arms) + ' else { rewrite { set("other", value("cls")); }; };'


# (statement, what goes in the log path, file template)
REWRITES = {
    "subst": ('rewrite r { subst("[0-9]+", "N", value("MESSAGE") flags(global)); };', "rewrite(r);", ""),
    "set": ('rewrite r { set("$PROGRAM@$HOST", value("origin")); };', "rewrite(r);",
            ' template("$ISODATE ${origin} $MSG\\n")'),
    "classify": ("", _classify(), ' template("$ISODATE ${cls} $MSG\\n")'),
}


DISK_BUFFERS = {
    "none": "",
    "normal": " disk-buffer(reliable(no) dir(\"{work}\") disk-buf-size(4000000000) mem-buf-length(100000))",
    "reliable": " disk-buffer(reliable(yes) dir(\"{work}\") disk-buf-size(4000000000) mem-buf-size(163840000))",
    "relp": "",
}


def relay_config(args, port, sink_port, work):
    buffer = DISK_BUFFERS[args.forward].format(work=work)
    return f"""@version: 3.38
options {{ threaded(yes); log-fifo-size(1000000); use-dns(no); keep-hostname(yes); stats-freq(0); flush-lines(1000); }};
source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) max-connections(20000) log-iw-size(1000000) log-fetch-limit(1000)); }};
destination d {{ {"relp" if args.forward == "relp" else "network"}("127.0.0.1" port({sink_port}){buffer}); }};
log {{ source(s); destination(d); flags(flow-control); }};
"""


def start_sink(work, port, out, relp=False):
    """The receiving end of a relay benchmark: a sluice writing what it receives to `out`."""
    conf = os.path.join(work, "sink.conf")
    driver = "relp" if relp else "network"
    open(conf, "w").write(f"""options {{ keep-hostname(yes); use-dns(no); }};
source s {{ {driver}(ip(127.0.0.1) port({port}) max-connections(100) log-iw-size(1000000)); }};
destination d {{ file("{out}"); }};
log {{ source(s); destination(d); }};
""")
    cmd = [SLUICE, "-F", "-f", conf, "-p", f"{work}/sink.pid"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "sink.stderr"), "w"))


def wait_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)


def certificate(work):
    """A self-signed certificate and key for the TLS runs: (cert, key) paths in `work`."""
    cert, key = os.path.join(work, "server.pem"), os.path.join(work, "server.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "30", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def syslog_ng_config(args, port, out, work, server="sluice"):
    driver = "network" if args.proto == "3164" else "syslog"
    rewrite, element, template = REWRITES.get(args.rewrite, ("", "", ""))
    if args.patterndb:
        bound = f" max-contexts({args.max_contexts})" if args.max_contexts and server == "sluice" else ""
        rewrite += f'\nparser pdb {{ db-parser(file("{args.patterndb}"){bound}); }};'
        element += " parser(pdb);"
    if args.format_json:
        template = ' template("$(format-json --scope rfc5424 --scope nv-pairs)\\n")'
    transport = "transport(tcp)"
    if args.tls:
        cert, key = certificate(work)
        transport = f'transport(tls) tls(key-file("{key}") cert-file("{cert}") peer-verify(optional-untrusted))'
    path = os.path.join(out, "${HOST}.log") if args.per_host else out
    return f"""@version: 3.38
options {{ threaded(yes); log-fifo-size(1000000); use-dns(no); keep-hostname(yes); stats-freq(0); flush-lines(1000); }};
source s {{ {driver}(ip(127.0.0.1) port({port}) {transport} max-connections(20000) log-iw-size(1000000) log-fetch-limit(1000)); }};
destination d {{ file("{path}" flush-lines(1000){template}); }};
{rewrite}
log {{ source(s); {element} destination(d); }};
"""


def rsyslog_config(args, port, work, out):
    lib = f"{RSYSLOG}/usr/lib/x86_64-linux-gnu"
    framing = "" if args.proto == "3164" else ' supportOctetCountedFraming="on"'
    if args.tls:  # imptcp has no TLS: imtcp with the OpenSSL driver
        cert, key = certificate(work)
        inputs = f"""global(DefaultNetstreamDriverCertFile="{cert}" DefaultNetstreamDriverKeyFile="{key}")
module(load="{lib}/rsyslog/imtcp.so" StreamDriver.Name="ossl" StreamDriver.Mode="1" StreamDriver.AuthMode="anon" MaxSessions="20000" MaxListeners="10")
input(type="imtcp" port="{port}" address="127.0.0.1")"""
    else:
        inputs = f"""module(load="{lib}/rsyslog/imptcp.so" threads="2")
input(type="imptcp" port="{port}" address="127.0.0.1"{framing})"""
    if args.per_host:
        action = f"""template(name="per_host" type="string" string="{out}/%HOSTNAME%.log")
action(type="omfile" dynaFile="per_host" dynaFileCacheSize="1000" template="fwd" ioBufferSize="1m" flushOnTXEnd="off")"""
    else:
        action = f'action(type="omfile" file="{out}" template="fwd" ioBufferSize="1m" flushOnTXEnd="off")'
    return f"""global(workDirectory="{work}" maxMessageSize="64k")
{inputs}
main_queue(queue.type="FixedArray" queue.size="1000000" queue.dequeueBatchSize="1024" queue.workerThreads="1")
template(name="fwd" type="string" string="%TIMESTAMP% %HOSTNAME% %syslogtag%%msg%\\n")
{action}
"""


def installed(server):
    if server == "sluice":
        return os.path.exists(SLUICE)
    if server == "syslog-ng":
        return shutil.which("syslog-ng") is not None
    if server == "rsyslog":
        return os.path.exists(f"{RSYSLOG}/usr/sbin/rsyslogd")
    raise SystemExit(f"unknown server {server}")


def start(server, args, work, port, out, sink_port=None):
    err = open(os.path.join(work, "stderr"), "w")
    if server in ("sluice", "syslog-ng"):
        conf = os.path.join(work, "server.conf")
        text = relay_config(args, port, sink_port, work) if args.forward else syslog_ng_config(args, port, out, work, server)
        open(conf, "w").write(text)
        binary = SLUICE if server == "sluice" else "syslog-ng"
        extra = ["--no-caps"] if server == "syslog-ng" else []
        cmd = [binary, "-F", *extra, "-f", conf, "-R", f"{work}/persist", "-p", f"{work}/pid", "-c", f"{work}/ctl"]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    conf = os.path.join(work, "rsyslog.conf")
    open(conf, "w").write(rsyslog_config(args, port, work, out))
    lib = f"{RSYSLOG}/usr/lib/x86_64-linux-gnu"
    cmd = [f"{RSYSLOG}/usr/sbin/rsyslogd", "-n", "-f", conf, "-i", f"{work}/pid", "-M", f"{lib}/rsyslog"]
    return subprocess.Popen(cmd, env=dict(os.environ, LD_LIBRARY_PATH=lib), stdout=subprocess.DEVNULL, stderr=err)


def files_of(path):
    """The file `path`, or the files of the folder `path`; none while it does not exist."""
    if not os.path.exists(path):
        return []
    return [os.path.join(path, n) for n in os.listdir(path)] if os.path.isdir(path) else [path]


def count_lines(path, seen):
    """Lines in the file `path`, or in the files of the folder `path`, reading only what was
    added since the last call (seen: file -> [offset, lines])."""
    for name in files_of(path):
        at = seen.setdefault(name, [0, 0])
        with open(name, "rb") as f:
            f.seek(at[0])
            for block in iter(lambda: f.read(1 << 22), b""):
                at[1] += block.count(b"\n")
            at[0] = f.tell()
    return sum(lines for _, lines in seen.values())


def stored_bytes(path):
    """Bytes in the file `path`, or in the files of the folder `path`."""
    return sum(os.stat(name).st_size for name in files_of(path))


def wait_stored(out, seen, want):
    """Waits until `out` holds `want` lines, or 5 s pass without it growing; returns when it last
    grew. Lines are counted only when it stopped growing: counting while the server writes
    would take CPU from it (a file per host is hundreds of files to read each time)."""
    last, grew = -1, time.time()
    while True:
        size, now = stored_bytes(out), time.time()
        if size != last:
            last, grew = size, now
        elif count_lines(out, seen) >= want or now - grew >= 5:
            return grew
        time.sleep(0.02)


def measure(server, proc, out, want, started, unit):
    """Waits until `out` holds `want` lines, stops `proc` and returns (items/s since `started`,
    CPU µs per item, peak MiB): what files.py and journal.py measure of a server that reads
    what was written before it started."""
    seen = {}
    last = wait_stored(out, seen, want)
    got = count_lines(out, seen)
    cpu, rss = cpu_seconds(proc.pid), peak_rss_mib(proc.pid)
    proc.terminate()
    proc.wait()
    if got < want:
        print(f"  {server}: {got} of {want} {unit}s", file=sys.stderr)
    return got / (last - started), cpu / max(got, 1) * 1e6, rss


def print_medians(results, unit, heading):
    """The medians of rounds of (rate, CPU µs per item, peak MiB) per server, and the ratios of
    sluice's to each other server's: the table files.py and journal.py print."""
    print(f"\n{heading}")
    print(f"{'server':<10} {unit + '/s':>12} {'CPU us/' + unit:>13} {'peak MiB':>9}")
    med = {}
    for s, rows in results.items():
        rate = statistics.median(x[0] for x in rows)
        us = statistics.median(x[1] for x in rows)
        rss = max(x[2] for x in rows)
        med[s] = (rate, us)
        print(f"{s:<10} {rate:>12,.0f} {us:>13.2f} {rss:>9.0f}")
    if "sluice" in med:
        for s in med:
            if s != "sluice":
                print(f"sluice/{s}: {med['sluice'][0] / med[s][0]:.1f}x the rate, "
                      f"{med[s][1] / med['sluice'][1]:.1f}x less CPU per {unit}")


def run_once(server, args):
    work = tempfile.mkdtemp(prefix=f"sluice-bench-{server}-")
    out = os.path.join(work, "all.log")
    if args.per_host:
        out = os.path.join(work, "hosts")
        os.makedirs(out)
    port = free_port()
    sink = None
    if args.forward:
        sink_port = free_port()
        sink = start_sink(work, sink_port, out, relp=args.forward == "relp")
        wait_port(sink_port)
        proc = start(server, args, work, port, out, sink_port)
    else:
        proc = start(server, args, work, port, out)
    try:
        wait_port(port)
        time.sleep(0.3)
        total = args.conns * (args.count // args.conns)
        loggen = [SLUICE, "loggen", "-Q", "-r", "0", "-s", str(args.size),
                  "--active-connections", str(args.conns), "-I", "3600"]
        if args.proto == "5424":
            loggen.append("-P")
        if args.corpus:
            loggen += ["-R", args.corpus, "-l", "-d"]
        if args.idle:
            loggen += ["--idle-connections", str(args.idle)]
        if args.tls:
            loggen.append("-U")
        seen, before = {}, 0
        # A pass of the corpus first makes every host's file; the one-file baseline gets the
        # same pass, so that both measure a server that has been running.
        if args.per_host or args.against_one_file:
            lines = sum(1 for line in open(args.corpus, "rb") if line.strip())
            subprocess.run([*loggen, "-n", str(lines), "127.0.0.1", str(port)], capture_output=True, check=True)
            before = args.conns * lines
            wait_stored(out, seen, before)
        cpu0, t0 = cpu_seconds(proc.pid), time.time()
        sent = subprocess.run([*loggen, "-n", str(args.count // args.conns), "127.0.0.1", str(port)],
                              capture_output=True, text=True)
        t1 = wait_stored(out, seen, before + total)
        cpu1, rss = cpu_seconds(proc.pid), peak_rss_mib(proc.pid)
    finally:
        for p in (proc, sink):
            if p is None:
                continue
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    # Count again once the server has stopped: rsyslog keeps its last partial buffer until then.
    got = count_lines(out, seen) - before
    shutil.rmtree(work, ignore_errors=True)
    wall = t1 - t0
    note = "" if got >= total else f"  INCOMPLETE: stored {got} of {total}"
    if sent.returncode:
        note += "  loggen: " + sent.stderr.strip()[-200:]
    rate = total / wall if not note else 0.0
    cpu = 1e6 * (cpu1 - cpu0) / total
    mode = f" forward={args.forward}" if args.forward else " tls" if args.tls else " per-host" if args.per_host else ""
    print(f"{server:10s}{mode} proto={args.proto} conns={args.conns} count={total} stored={got} wall={wall:.2f}s "
          f"rate={rate:,.0f} msg/s cpu={cpu:.2f} us/msg peak-rss={rss:.0f} MiB{note}", flush=True)
    return rate, cpu, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conns", type=int, default=10)
    ap.add_argument("--count", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--proto", choices=["3164", "5424"], default="3164")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle", type=int, default=0, help="connections that stay open and silent during the run (peak RSS)")
    ap.add_argument("--rewrite", choices=["subst", "set", "classify"],
                    help="a rewrite rule (or, classify: ten if/elif rules) in the path")
    ap.add_argument("--patterndb", help="db-parser() with this pattern database in the path")
    ap.add_argument("--max-contexts", type=int, help="sluice's db-parser(max-contexts()) (bench/contexts.py)")
    ap.add_argument("--format-json", action="store_true", help="write messages with $(format-json)")
    ap.add_argument("--corpus", help="send the lines of this file instead of synthetic messages")
    ap.add_argument("--forward", choices=["none", "normal", "reliable", "relp"],
                    help="benchmark a relay: forward over TCP with no disk buffer, a normal or a reliable one, or over RELP (sluice only)")
    ap.add_argument("--tls", action="store_true", help="TLS sources, loggen -U")
    ap.add_argument("--per-host", action="store_true", help="a file per host, made before the measured run (needs --corpus)")
    against = ap.add_mutually_exclusive_group()
    against.add_argument("--against-plain", action="store_true",
                         help="each round also runs plain TCP just before TLS; prints TLS/plain per round")
    against.add_argument("--against-conns", type=int, metavar="N",
                         help="each round also runs N connections just before CONNS; prints the ratio per round")
    against.add_argument("--against-no-parser", action="store_true",
                         help="each round also runs without --patterndb just before; prints the ratio per round")
    against.add_argument("--against-one-file", action="store_true",
                         help="each round also runs one file just before --per-host; prints the ratio per round")
    ap.add_argument("--servers", default="sluice,syslog-ng,rsyslog")
    ap.add_argument("--no-build", action="store_true", help="use the release binary as it is")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    servers = []
    for s in args.servers.split(","):
        if s == "rsyslog" and (args.rewrite or args.format_json or args.forward or args.patterndb):
            print("note: rsyslog has no equivalent configuration to compare, left out", file=sys.stderr)
        elif s == "syslog-ng" and args.forward == "relp":
            print("note: syslog-ng has no RELP, left out", file=sys.stderr)
        elif installed(s):
            servers.append(s)
        else:
            print(f"note: {s} is not installed, left out (bench/README.md)", file=sys.stderr)
    if args.against_plain and not args.tls:
        raise SystemExit("--against-plain compares TLS with plain TCP: give --tls too")
    if args.per_host and not args.corpus:
        raise SystemExit("--per-host needs --corpus: sluice loggen's own messages all come from one host")
    if args.per_host and args.forward:
        raise SystemExit("--per-host measures the file destination: it does not go with --forward")
    if args.against_one_file and not args.per_host:
        raise SystemExit("--against-one-file compares a file per host with one file: give --per-host too")
    baseline = None
    if args.against_plain:
        baseline = argparse.Namespace(**{**vars(args), "tls": False})
    elif args.against_conns:
        baseline = argparse.Namespace(**{**vars(args), "conns": args.against_conns})
    elif args.against_one_file:
        baseline = argparse.Namespace(**{**vars(args), "per_host": False})
    elif args.against_no_parser:
        baseline = argparse.Namespace(**{**vars(args), "patterndb": None})
    results = {s: [] for s in servers}
    ratios = {s: [] for s in servers}
    for _ in range(args.rounds):
        for s in servers:
            base = run_once(s, baseline)[0] if baseline else None
            results[s].append(run_once(s, args))
            if base:
                ratios[s].append(results[s][-1][0] / base)
    print()
    print(f"| server | msg/s (median of {args.rounds}) | CPU µs/msg | peak RSS MiB |")
    print("|---|---|---|---|")
    med = {}
    for s, rows in results.items():
        rate, cpu, rss = (statistics.median(r[i] for r in rows) for i in range(3))
        med[s] = rate
        print(f"| {s} | {rate:,.0f} | {cpu:.2f} | {rss:.0f} |")
    if "sluice" in med:
        for s, m in med.items():
            if s != "sluice" and m:
                print(f"sluice / {s} = {med['sluice'] / m:.2f}")
    if baseline:
        if args.against_plain:
            measured, against = "TLS", "plain TCP"
        elif args.against_one_file:
            measured, against = "a file per host", "one file"
        elif args.against_no_parser:
            measured, against = "db-parser()", "no parser"
        else:
            measured, against = f"{args.conns} connections", f"{args.against_conns} connections"
        for s, r in ratios.items():
            if r:
                rounds = ", ".join(f"{x:.0%}" for x in r)
                print(f"{s}: {measured} / {against} = {statistics.median(r):.0%} (rounds: {rounds})")


if __name__ == "__main__":
    main()
