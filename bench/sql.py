#!/usr/bin/env python3
"""sql() into PostgreSQL 15, MariaDB 10.11 and SQLite: sluice against syslog-ng 3.38's sql(),
beside the database's own bulk load of the same rows, in one run.

usage: bench/sql.py [--db pgsql,mysql,sqlite] [--count N] [--ng-count N] [--rounds N] [--defaults]
                    [--options "..."] [--modes ...] [--no-build]

For each database, a server started here (PostgreSQL: `initdb` in a temporary directory, run as
user `postgres` when root, `fsync=off` as ../shared/recipes/pg-server.sh starts it; MariaDB:
`mariadb-install-db` and `mariadbd` as ../shared/recipes/mariadb.sh starts them, commits flushed
once a second, with utf8mb4 as Debian configures it; SQLite: a file in a temporary directory),
then rounds in which each mode comes first once, each on a fresh
table `logs (date, host, program, pid, message)`:
  copy        (pgsql) `psql -c "\\copy logs FROM FILE"` of the same rows, made before the clock
              starts: the server's own ceiling,
  load        (mysql) the `mariadb` client's `LOAD DATA LOCAL INFILE` of the same rows,
  import      (sqlite) the `sqlite3` CLI's `.import` of the same rows, one transaction,
  syslog-ng   syslog-ng 3.38's sql() with `flags(explicit-commits) batch-lines(1000)` (the
              faster of its two ways; --ng-default for its default, a commit a row),
  sluice      sluice's sql() with the same options,
the shippers fed 300-byte messages over 4 TCP connections by `sluice loggen -S -s 300` on a
flow-controlled path, tuned (a window of a million) or with --defaults as a user writes them.
A run ends when the table holds every row (PostgreSQL: `count(*)`; SQLite: the shipper's
`written` counter, as a reader of the file would make syslog-ng's INSERT fail as busy and
wait 60 s). syslog-ng's runs send --ng-count messages (it stores ~10,000 a second).

Prints msg/s and the shipper's CPU µs a row, the medians, sluice against the ceiling (the
issue's 50 % bar) and against syslog-ng (20x for PostgreSQL, 10x for MariaDB, 2x for SQLite).
"""

import argparse
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import downstream  # noqa: E402
import run  # noqa: E402

PGBIN = "/usr/lib/postgresql/15/bin"
COLUMNS = '"date", "host", "program", "pid", "message"'
VALUES = '"${R_YEAR}-${R_MONTH}-${R_DAY} ${R_HOUR}:${R_MIN}:${R_SEC}", "${HOST}", "${PROGRAM}", "${PID}", "${MSGONLY}"'
TABLE = "CREATE TABLE logs (date text, host text, program text, pid text, message text)"
BARS = {"pgsql": ("copy", "50 %", 20), "mysql": ("load", "50 %", 10), "sqlite": ("import", "50 %", 2)}


class Postgres:
    """A PostgreSQL 15 cluster of its own, user `syslog` (password `syslog`), database
    `syslogtest`."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-bench-pg-")
        self.port = run.free_port()
        owner = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            owner = (pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, *owner)
        as_owner = (lambda: (os.setgid(owner[1]), os.setuid(owner[0]))) if owner else None
        pwfile = os.path.join(self.dir, "pw")
        open(pwfile, "w").write("postgres\n")
        if owner:
            os.chown(pwfile, *owner)
        subprocess.run([f"{PGBIN}/initdb", "-D", f"{self.dir}/data", "-U", "postgres", "-A", "scram-sha-256",
                        "-E", "UTF8", "--no-sync", f"--pwfile={pwfile}"], check=True, capture_output=True,
                       preexec_fn=as_owner)
        self.proc = subprocess.Popen(
            [f"{PGBIN}/postgres", "-D", f"{self.dir}/data", "-p", str(self.port), "-k", self.dir,
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
            stdout=open(os.path.join(self.dir, "pg.out"), "w"), stderr=subprocess.STDOUT, preexec_fn=as_owner)
        started = time.time()
        while self.psql("postgres", "SELECT 1", check=False).returncode != 0:
            if time.time() - started > 60:
                raise SystemExit("PostgreSQL did not start:\n" + open(os.path.join(self.dir, "pg.out")).read())
            time.sleep(0.2)
        self.psql("postgres", "CREATE USER syslog WITH PASSWORD 'syslog'")
        self.psql("postgres", "CREATE DATABASE syslogtest OWNER syslog")

    def psql(self, user, sql, check=True):
        env = dict(os.environ, PGPASSWORD=user)
        db = "postgres" if user == "postgres" else "syslogtest"
        return subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", user, "-d", db, "-X", "-q",
                               "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql],
                              env=env, capture_output=True, text=True, check=check)

    def fresh_table(self):
        self.psql("syslog", "SET client_min_messages=warning; DROP TABLE IF EXISTS logs; " + TABLE)

    def count(self):
        out = self.psql("syslog", "SELECT count(*) FROM logs", check=False).stdout.strip()
        return int(out) if out.isdigit() else 0

    def destination(self, options):
        return (f'sql(type(pgsql) host("127.0.0.1") port("{self.port}") username("syslog") password("syslog") '
                f'database("syslogtest") table("logs") columns({COLUMNS}) values({VALUES}) indexes() {options})')

    def ceiling(self, rows):
        t0 = time.time()
        self.psql("syslog", f"\\copy logs FROM '{rows}'")
        return time.time() - t0

    def cpu(self):
        """The CPU seconds of the server's processes (the postmaster and its backends)."""
        total = 0.0
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    if open(f"/proc/{pid}/comm").read().strip() == "postgres":
                        total += run.cpu_seconds(int(pid))
                except (FileNotFoundError, ProcessLookupError):
                    pass
        return total

    def stop(self):
        downstream.stop_service(self.proc, self.dir, 60)


class Mariadb:
    """A MariaDB server of its own, user `syslog` (password `syslog`), database `syslogtest`."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-bench-mariadb-")
        self.port = run.free_port()
        user = "mysql" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0:
            pw = pwd.getpwnam("mysql")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.socket = os.path.join(self.dir, "mysqld.sock")
        subprocess.run(["mariadb-install-db", f"--user={user}", f"--datadir={self.dir}/data",
                        "--auth-root-authentication-method=normal", "--skip-test-db"], check=True, capture_output=True)
        self.proc = subprocess.Popen(
            ["/usr/sbin/mariadbd", "--no-defaults", f"--user={user}", f"--datadir={self.dir}/data",
             f"--socket={self.socket}", f"--pid-file={self.dir}/mysqld.pid", f"--port={self.port}",
             "--bind-address=127.0.0.1", "--skip-name-resolve", "--local-infile=1", "--innodb-log-file-size=256M",
             "--innodb-buffer-pool-size=512M", "--innodb-flush-log-at-trx-commit=0",
             "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
             f"--log-error={self.dir}/err.log"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        started = time.time()
        while self.root("SELECT 1", check=False).returncode != 0:
            if time.time() - started > 60:
                raise SystemExit("MariaDB did not start:\n" + open(os.path.join(self.dir, "err.log")).read())
            time.sleep(0.2)
        self.root("CREATE DATABASE syslogtest; CREATE USER 'syslog'@'127.0.0.1' IDENTIFIED BY 'syslog'; "
                  "GRANT ALL ON syslogtest.* TO 'syslog'@'127.0.0.1'")

    def root(self, sql, check=True):
        return subprocess.run(["mariadb", f"--socket={self.socket}", "-uroot", "-N", "-B", "-e", sql],
                              capture_output=True, text=True, check=check)

    def client(self, sql, *extra):
        return subprocess.run(["mariadb", "-h127.0.0.1", "-P", str(self.port), "-usyslog", "-psyslog", *extra,
                               "syslogtest", "-N", "-B", "-e", sql], capture_output=True, text=True)

    def fresh_table(self):
        self.client("DROP TABLE IF EXISTS logs; " + TABLE + " ENGINE=InnoDB")

    def count(self):
        out = self.client("SELECT count(*) FROM logs").stdout.strip()
        return int(out) if out.isdigit() else 0

    def destination(self, options):
        return (f'sql(type(mysql) host("127.0.0.1") port("{self.port}") username("syslog") password("syslog") '
                f'database("syslogtest") table("logs") columns({COLUMNS}) values({VALUES}) indexes() {options})')

    def ceiling(self, rows):
        t0 = time.time()
        self.client(f"LOAD DATA LOCAL INFILE '{rows}' INTO TABLE logs", "--local-infile=1")
        return time.time() - t0

    def cpu(self):
        return run.cpu_seconds(self.proc.pid)

    def stop(self):
        downstream.stop_service(self.proc, self.dir, 60)


class Sqlite:
    """A database file in a directory of its own."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-bench-sqlite-")
        self.db = os.path.join(self.dir, "logs.db")
        self.shipper = None

    def fresh_table(self):
        for suffix in ("", "-journal", "-wal", "-shm"):
            if os.path.exists(self.db + suffix):
                os.remove(self.db + suffix)
        subprocess.run(["sqlite3", self.db, TABLE], check=True)

    def count(self):
        """The rows the shipper says it wrote: the file is not read while it writes."""
        if self.shipper is None:
            out = subprocess.run(["sqlite3", self.db, "SELECT count(*) FROM logs"], capture_output=True, text=True)
            return int(out.stdout.strip() or 0)
        mode, work = self.shipper
        ctl = ["syslog-ng-ctl", "stats", "-c", f"{work}/ctl"] if mode == "syslog-ng" else \
            [run.SLUICE, "ctl", "-c", f"{work}/ctl", "stats"]
        out = subprocess.run(ctl, capture_output=True, text=True).stdout
        return sum(int(line.rsplit(";", 1)[1]) for line in out.splitlines()
                   if line.startswith("dst.sql;") and ";a;written;" in line)

    def destination(self, options):
        return (f'sql(type(sqlite3) database("{self.db}") table("logs") columns({COLUMNS}) values({VALUES}) '
                f'indexes() {options})')

    def ceiling(self, rows):
        t0 = time.time()
        subprocess.run(["sqlite3", self.db, "-cmd", ".mode tabs", f".import {rows} logs"], check=True)
        return time.time() - t0

    def cpu(self):
        return 0.0

    def stop(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def write_rows(path, total):
    """The rows the shippers make of loggen's lines, as tab-separated text."""
    with open(path, "w") as f:
        for i in range(total):
            f.write(f"2026-11-24 13:50:17\tlocalhost\tprg00000\t1234\t{downstream.loggen_message(i)}\n")


def run_once(db, name, mode, args):
    db.fresh_table()
    work = tempfile.mkdtemp(prefix=f"sluice-bench-sql-{mode}-")
    total = 4 * ((args.ng_count if mode == "syslog-ng" else args.count) // 4)
    proc, loader = None, 0.0
    try:
        if mode in ("copy", "load", "import"):
            rows = os.path.join(work, "rows.tsv")
            write_rows(rows, total)
            server0 = db.cpu()
            wall = db.ceiling(rows)
            got, cpu = db.count(), 0.0
            server = 1e6 * (db.cpu() - server0) / total
            t0, t1 = 0.0, wall
        else:
            options = args.ng_options if mode == "syslog-ng" else args.options
            proc, port = downstream.start_shipper(mode, work, db.destination(options), defaults=args.defaults)
            db.shipper = (mode, work)
            server0, cpu0, t0 = db.cpu(), run.cpu_seconds(proc.pid), time.time()
            loader = 1e6 * downstream.send_load(port, total) / total
            got, t1 = downstream.wait_count(db.count, total, proc)
            cpu = 1e6 * (run.cpu_seconds(proc.pid) - cpu0) / total
            server = 1e6 * (db.cpu() - server0) / total
    finally:
        err = downstream.stop_shipper(proc, work) if proc is not None else ""
        db.shipper = None
        shutil.rmtree(work, ignore_errors=True)
    if mode not in ("copy", "load", "import") and got == total:
        got = db.count()
    note = "" if got == total else f"  INCOMPLETE: {got} of {total}\n{err}"
    rate = total / (t1 - t0) if not note else 0.0
    print(f"{name:6s} {mode:10s} count={total} wall={t1 - t0:.2f}s rate={rate:,.0f} msg/s "
          f"shipper-cpu={cpu:.2f} us/msg server-cpu={server:.1f} us/msg loader-cpu={loader:.2f} us/msg{note}",
          flush=True)
    return rate, cpu, server, loader


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default="pgsql,mysql,sqlite")
    p.add_argument("--count", type=int, default=1_000_000)
    p.add_argument("--ng-count", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--options", default="flags(explicit-commits) batch-lines(1000) batch-timeout(100)",
                   help="sluice's sql() options beyond the table's")
    p.add_argument("--ng-options", default="flags(explicit-commits) batch-lines(1000) batch-timeout(100)",
                   help="syslog-ng's sql() options beyond the table's")
    p.add_argument("--ng-default", action="store_true", help="syslog-ng's sql() with no options: a commit a row")
    p.add_argument("--defaults", action="store_true",
                   help="the servers at the defaults a user writes (no window, queue or thread options)")
    p.add_argument("--modes", default="ceiling,syslog-ng,sluice")
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()
    if args.ng_default:
        args.ng_options = ""
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=run.ROOT, check=True)
    for name in args.db.split(","):
        ceiling = BARS[name][0]
        modes = [ceiling if m == "ceiling" else m for m in args.modes.split(",") if m]
        db = {"pgsql": Postgres, "mysql": Mariadb, "sqlite": Sqlite}[name]()
        try:
            results = downstream.rounds(modes, args.rounds, lambda m, r: run_once(db, name, m, args))
        finally:
            db.stop()
        downstream.print_medians(results, "msg", "database", ceiling, BARS[name][1], also=[])
        import statistics
        ours, theirs = results.get("sluice"), results.get("syslog-ng")
        if ours and theirs and statistics.median(r[0] for r in theirs) > 0:
            ratio = statistics.median(r[0] for r in ours) / statistics.median(r[0] for r in theirs)
            print(f"{name}: sluice / syslog-ng: {ratio:.1f}x the rate (bar {BARS[name][2]}x)\n")


if __name__ == "__main__":
    main()
