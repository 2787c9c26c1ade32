#!/bin/sh
# Builds the Debian package: the binary, its manual pages and shell completions (written by
# the binary itself, from its command-line definitions), then `cargo deb` (the cargo-deb
# crate: `cargo install cargo-deb`). Writes target/debian/sluice_*.deb (under
# $CARGO_TARGET_DIR when it is set).
#
# SLUICE_PACKAGE_PROFILE picks the Cargo profile of the binary: `release` (the default, what
# is shipped: fat LTO, ~13 minutes from nothing on two cores) or `dev` (the binary the test
# suite has already built: tests/package.rs checks the packaging with it in seconds).
set -e
cd "$(dirname "$0")/.."
profile="${SLUICE_PACKAGE_PROFILE:-release}"
case "$profile" in
  dev) dir=debug ;;
  *) dir="$profile" ;;
esac
cargo build --profile "$profile" --locked --bin sluice
sluice="${CARGO_TARGET_DIR:-target}/$dir/sluice"
# The package's assets name these paths, in the checkout whatever the target directory.
out=target/packaging
rm -rf "$out" && mkdir -p "$out/man" "$out/completions"
"$sluice" manpages "$out/man"
gzip -9n "$out"/man/*
"$sluice" completions bash > "$out/completions/sluice"
"$sluice" completions zsh > "$out/completions/_sluice"
"$sluice" completions fish > "$out/completions/sluice.fish"
cargo deb --no-build --locked --strip --profile "$profile" "$@"
