#!/bin/sh
# Runs a command with this machine's journal replaced by the journal files in DIR, in a
# private mount namespace (`unshare --mount --propagation private`): DIR is /var/log/journal
# there, /run is empty (no runtime journal), and with --systemd /run/systemd/system exists, as
# on a host that systemd runs. The host's own journal and /run are not touched.
#
# usage: unshare --mount --propagation private journal-namespace.sh DIR [--systemd] COMMAND...
set -e
dir=$1; shift
systemd=
if [ "$1" = --systemd ]; then systemd=1; shift; fi
mount -t tmpfs none /var/log
mkdir -p /var/log/journal
mount --bind "$dir" /var/log/journal
mount -t tmpfs none /run
mkdir -p /run/log/journal
if [ -n "$systemd" ]; then mkdir -p /run/systemd/system; fi
exec "$@"
