#!/usr/bin/env bash
# Installs what the test suite runs against, from Debian's packages:
#   syslog-ng-core  the reference implementation for the differential tests, and `loggen`
#   bsdutils        `logger` (util-linux) for the real-client tests
#   python3         the SysLogHandler client test
# Idempotent; needs root (or sudo) the first time.
set -euo pipefail
need=()
command -v syslog-ng >/dev/null || need+=(syslog-ng-core)
command -v logger >/dev/null || need+=(bsdutils)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing test dependencies: ${need[*]}"
  $sudo apt-get update -qq
  # Installing syslog-ng-core must not start a system syslog daemon that takes port 514.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
syslog-ng --version | head -1
