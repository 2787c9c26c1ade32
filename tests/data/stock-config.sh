#!/bin/sh
# Runs a server on Debian's stock /etc/syslog-ng/syslog-ng.conf, unchanged, in a private
# mount namespace (`unshare --mount --propagation private`): /var/log and /dev are temporary
# there (the devices the server and logger need are bound in from the real /dev), so the
# host's logs and /dev/log are not touched. Sends three messages with logger, stops the
# server and leaves the log files in WORK/varlog.
#
# usage: unshare --mount --propagation private stock-config.sh WORK SERVER [ARGS...]
set -e
work=$1; shift
mkdir -p "$work/origdev" "$work/varlog"
mount --bind /dev "$work/origdev"
mount -t tmpfs none /dev
for d in null zero urandom random kmsg tty10; do
  if [ -e "$work/origdev/$d" ]; then touch "/dev/$d"; mount --bind "$work/origdev/$d" "/dev/$d"; fi
done
mount --bind "$work/varlog" /var/log
"$@" -F -f /etc/syslog-ng/syslog-ng.conf -R "$work/persist" -c "$work/ctl" -p "$work/pid" 2> "$work/stderr" &
pid=$!
for i in $(seq 100); do [ -S /dev/log ] && break; sleep 0.1; done
logger -p auth.info "stock config: an auth message"
logger -p user.notice "stock config: a user message"
logger -p mail.err "stock config: a mail error"
sleep 2
kill "$pid"
wait "$pid" || true
