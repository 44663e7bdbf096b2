#!/bin/sh
# Make DIR a cargo "directory" source holding Debian's packaged crates: the sysroot's vendored
# dependencies (rust-web-src, needed by -Z build-std) and /usr/share/cargo/registry (librust-*-dev:
# serde, serde_json, ...), as symlinks. Idempotent; built beside DIR and renamed into place, so
# concurrent builds never see a half-made directory. Usage: tools/vendor.sh DIR
set -eu
dir="$1"
[ -d "$dir" ] && exit 0
tmp="$dir.tmp.$$"
mkdir -p "$tmp"
for d in /usr/lib/rustlib/src/rust/library/vendor/* /usr/share/cargo/registry/*; do
  [ -d "$d" ] && ln -sfn "$d" "$tmp/$(basename "$d")"
done
mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
