#!/usr/bin/env bash
# Installs what `make bench` needs on a fresh Debian machine (as .ci/run does for the tests):
# the native and qemu baselines (gcc, gcc-riscv64-linux-gnu, qemu-user) and the npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
for p in gcc libc6-dev qemu-user gcc-riscv64-linux-gnu postgresql; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

[ -d node_modules/binaryen ] || npm ci --no-audit --no-fund
