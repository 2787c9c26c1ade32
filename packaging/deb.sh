#!/bin/sh
# Builds the Debian package: the release binary, its manual pages and shell completions
# (written by the binary itself, from its command-line definitions), then `cargo deb` (the
# cargo-deb crate: `cargo install cargo-deb`). Writes target/debian/sluice_*.deb (under
# $CARGO_TARGET_DIR when it is set).
set -e
cd "$(dirname "$0")/.."
cargo build --release --locked
sluice="${CARGO_TARGET_DIR:-target}/release/sluice"
# The package's assets name these paths, in the checkout whatever the target directory.
out=target/packaging
rm -rf "$out" && mkdir -p "$out/man" "$out/completions"
"$sluice" manpages "$out/man"
gzip -9n "$out"/man/*
"$sluice" completions bash > "$out/completions/sluice"
"$sluice" completions zsh > "$out/completions/_sluice"
"$sluice" completions fish > "$out/completions/sluice.fish"
cargo deb --no-build --locked --strip "$@"
