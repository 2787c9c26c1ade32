#!/usr/bin/env bash
# Installs what the test suite runs against, from Debian's packages:
#   syslog-ng-core  the reference implementation for the differential tests, and `loggen`
#   syslog-ng-mod-http  its http() destination, for the http() differential test
#   syslog-ng-mod-slog  its secure logging ($(slog), slogkey), which bench/logstore.py compares
#   bsdutils        `logger` (util-linux) for the real-client tests
#   python3         the SysLogHandler client test
#   openssl         the CLI that makes the TLS tests' certificates
#   curl            the OpenSearch tests' client
#   tinyproxy       an HTTP proxy for http()'s proxy() test
#   systemd-journal-remote  writes the journal files the systemd-journal() tests read
#   lintian         checks the Debian package (tests/package.rs)
#   cargo-deb       builds it (a crate, with `cargo install`)
#   rsyslog         unpacked under /opt/rsyslog with its TLS and RELP modules (see below)
#   syslog-ng-mod-rdkafka  its kafka-c() destination, for the Kafka differential test
#   syslog-ng-mod-sql, libdbd-sqlite3, libdbd-pgsql, libdbd-mysql  its sql() destination over
#                   SQLite, PostgreSQL and MariaDB, for the sql() differential tests
#   postgresql-15   the server the sql(type(pgsql)) tests start (tests/common/postgres.rs); its
#                   packaged cluster is not made (createcluster.d), no system server runs
#   mariadb-server, mariadb-client  the server the sql(type(mysql)) tests start (tests/common/mariadb.rs)
#   syslog-ng-mod-mongodb  its mongodb() destination, for the mongodb() differential test
#   FerretDB 1.24   the MongoDB-wire server the mongodb() tests start over PostgreSQL, built with Go
#                   from the Go module proxy into /opt/sluice-test/ferretdb (below)
#   syslog-ng-scl   its elasticsearch-http() (an SCL block over http()), for the differential test
#   default-jre-headless, maven  run the Kafka broker and OpenSearch, fetched from Maven Central
# Idempotent; needs root (or sudo) the first time.
set -euo pipefail
need=()
command -v syslog-ng >/dev/null || need+=(syslog-ng-core)
[ -e /usr/lib/syslog-ng/3.38/libhttp.so ] || need+=(syslog-ng-mod-http)
[ -e /usr/lib/syslog-ng/3.38/libsecure-logging.so ] || need+=(syslog-ng-mod-slog)
[ -e /usr/lib/syslog-ng/3.38/libkafka.so ] || need+=(syslog-ng-mod-rdkafka)
[ -e /usr/lib/syslog-ng/3.38/libafsql.so ] || need+=(syslog-ng-mod-sql)
[ -e /usr/lib/x86_64-linux-gnu/dbd/libdbdsqlite3.so ] || need+=(libdbd-sqlite3)
[ -e /usr/lib/x86_64-linux-gnu/dbd/libdbdpgsql.so ] || need+=(libdbd-pgsql)
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
[ -e /usr/lib/x86_64-linux-gnu/dbd/libdbdmysql.so ] || need+=(libdbd-mysql)
[ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
command -v mariadb >/dev/null || need+=(mariadb-client)
[ -e /usr/lib/syslog-ng/3.38/libafmongodb.so ] || need+=(syslog-ng-mod-mongodb)
[ -e /usr/share/syslog-ng/include/scl/elasticsearch/elastic-http.conf ] || need+=(syslog-ng-scl)
command -v java >/dev/null || need+=(default-jre-headless)
command -v mvn >/dev/null || need+=(maven)
command -v logger >/dev/null || need+=(bsdutils)
command -v python3 >/dev/null || need+=(python3)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
[ -x /usr/bin/tinyproxy ] || need+=(tinyproxy)
[ -x /lib/systemd/systemd-journal-remote ] || need+=(systemd-journal-remote)
command -v lintian >/dev/null || need+=(lintian)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing test dependencies: ${need[*]}"
  $sudo apt-get update -qq
  # The tests make their own PostgreSQL clusters: the package makes none of its own.
  $sudo mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.d/sluice-tests.conf >/dev/null
  # Installing syslog-ng-core must not start a system syslog daemon that takes port 514.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
syslog-ng --version | head -1
# Pinned: tests/package.rs packages the suite's own dev-profile binary, which cargo-deb 3.8
# builds with a warning and says a later version may refuse.
case "$(cargo deb --version 2>/dev/null)" in
  "cargo-deb 3.8."*) ;;
  *) cargo install cargo-deb --version "~3.8" --locked --quiet ;;
esac
cargo deb --version

# rsyslog for the TLS and RELP interop tests. Debian's rsyslog conflicts with syslog-ng-core, so
# its packages are unpacked under /opt/rsyslog (not installed) and run from there, with the
# TLS drivers (rsyslog-openssl, rsyslog-gnutls) and RELP (rsyslog-relp, librelp0).
RSYSLOG=/opt/rsyslog
if [ ! -e "$RSYSLOG/usr/lib/x86_64-linux-gnu/rsyslog/omrelp.so" ] || [ ! -e "$RSYSLOG/usr/lib/x86_64-linux-gnu/rsyslog/lmnsd_ossl.so" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  tmp=$(mktemp -d)
  chmod 777 "$tmp"
  echo "unpacking rsyslog with its TLS and RELP modules under $RSYSLOG"
  (cd "$tmp" && apt-get download -qq rsyslog libestr0 libfastjson4 liblognorm5 rsyslog-openssl rsyslog-gnutls rsyslog-relp librelp0 2>/dev/null \
     || { $sudo apt-get update -qq && apt-get download -qq rsyslog libestr0 libfastjson4 liblognorm5 rsyslog-openssl rsyslog-gnutls rsyslog-relp librelp0; })
  $sudo mkdir -p "$RSYSLOG"
  for deb in "$tmp"/*.deb; do $sudo dpkg -x "$deb" "$RSYSLOG"; done
  rm -rf "$tmp"
fi
LD_LIBRARY_PATH=$RSYSLOG/usr/lib/x86_64-linux-gnu "$RSYSLOG/usr/sbin/rsyslogd" -v | head -1

# A Kafka broker (3.9, KRaft mode: no ZooKeeper) for the kafka-c() tests: its jars from Maven
# Central into /opt/sluice-test/kafka/lib; tests/common/kafka.rs starts one per test run.
KAFKA=/opt/sluice-test/kafka
if [ ! -e "$KAFKA/lib/.done" ]; then
  echo "fetching the Kafka 3.9.1 broker's jars into $KAFKA/lib"
  tmp=$(mktemp -d)
  cat > "$tmp/pom.xml" <<'POM'
<project><modelVersion>4.0.0</modelVersion><groupId>sluice</groupId><artifactId>kafka-for-tests</artifactId>
<version>1</version><packaging>pom</packaging><dependencies>
<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>3.9.1</version></dependency>
</dependencies></project>
POM
  mkdir -p "$KAFKA/lib"
  (cd "$tmp" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$KAFKA/lib")
  rm -rf "$tmp"
  touch "$KAFKA/lib/.done"
fi
ls "$KAFKA/lib" | grep -m1 '^kafka_2.13'

# OpenSearch 2.19 for the elasticsearch-http() and opensearch() tests: the server's jars and its
# netty transport module from Maven Central under /opt/sluice-test/opensearch/home;
# tests/common/opensearch.rs starts one node per test run, as user nobody (it refuses root).
OPENSEARCH=/opt/sluice-test/opensearch/home
if [ ! -e "$OPENSEARCH/.done" ]; then
  echo "fetching OpenSearch 2.19.1's jars into $OPENSEARCH"
  tmp=$(mktemp -d)
  dep() { echo "<dependency><groupId>$1</groupId><artifactId>$2</artifactId><version>$3</version></dependency>"; }
  pom() { echo "<project><modelVersion>4.0.0</modelVersion><groupId>sluice</groupId><artifactId>$1</artifactId><version>1</version><packaging>pom</packaging><dependencies>$2</dependencies></project>" > "$tmp/$1/pom.xml"; }
  mkdir -p "$tmp/core" "$tmp/netty" "$OPENSEARCH/bin" "$OPENSEARCH/lib" "$OPENSEARCH/plugins" "$OPENSEARCH/modules/transport-netty4"
  pom core "$(dep org.opensearch opensearch 2.19.1)$(dep org.opensearch opensearch-plugin-classloader 2.19.1)$(dep org.apache.logging.log4j log4j-core 2.21.0)"
  pom netty "$(dep org.opensearch.plugin transport-netty4-client 2.19.1)"
  (cd "$tmp/core" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$OPENSEARCH/lib")
  (cd "$tmp/netty" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$OPENSEARCH/modules/transport-netty4")
  printf '%s\n' description=netty4 version=2.19.1 name=transport-netty4 \
    classname=org.opensearch.transport.Netty4Plugin java.version=11 opensearch.version=2.19.1 \
    > "$OPENSEARCH/modules/transport-netty4/plugin-descriptor.properties"
  cat > "$OPENSEARCH/modules/transport-netty4/plugin-security.policy" <<'POLICY'
grant {
  permission java.io.FilePermission "/proc/sys/net/core/somaxconn", "read";
  permission java.net.SocketPermission "*", "accept,connect";
  permission java.lang.RuntimePermission "*", "setContextClassLoader";
  permission java.lang.RuntimePermission "getClassLoader";
  permission java.util.PropertyPermission "sun.nio.ch.bugLevel", "write";
};
POLICY
  chmod -R a+rX /opt/sluice-test
  rm -rf "$tmp"
  touch "$OPENSEARCH/.done"
fi
ls "$OPENSEARCH/lib" | grep -m1 '^opensearch-2'

# FerretDB 1.24 (a MongoDB-wire server over PostgreSQL) for the mongodb() tests, built from the
# Go module proxy (about a minute); tests/common/ferretdb.rs starts one per test run.
FERRET=/opt/sluice-test/ferretdb
if [ ! -e "$FERRET/.done" ]; then
  echo "building FerretDB v1.24.0 into $FERRET"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo mkdir -p "$FERRET" && $sudo chown "$(id -u)" "$FERRET"
  (
    export GOPATH=$FERRET/gopath GOMODCACHE=$FERRET/gopath/pkg/mod GOCACHE=$FERRET/gocache GOFLAGS=-buildvcs=false
    src=$(go mod download -json github.com/FerretDB/FerretDB@v1.24.0 | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
    rm -rf "$FERRET/src" && cp -r "$src" "$FERRET/src" && chmod -R u+w "$FERRET/src"
    # Written by FerretDB's own task runner; without it the binary stops at its start.
    echo v1.24.0 > "$FERRET/src/build/version/version.txt"
    cd "$FERRET/src" && go build -trimpath -o "$FERRET/bin/ferretdb" ./cmd/ferretdb
  )
  rm -rf "$FERRET/gocache"
  touch "$FERRET/.done"
fi
"$FERRET/bin/ferretdb" --version 2>/dev/null | head -1 || true
