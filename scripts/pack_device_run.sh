#!/usr/bin/env bash
# Packs what a run on the lent GPU machine needs into .devrun/ (git-ignored; carried by the device tool):
# the built executables (compressed), a copy of ../shared and the Fashion-MNIST files.
#   scripts/pack_device_run.sh [build-dir] [baseline-build-dir]
# BINS (space-separated names) limits the executables packed (default: all); a baseline build's OLD_BINS
# (default `train`) go to .devrun/old.tar.xz for before/after comparisons in one call.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf .devrun && mkdir -p .devrun/data
# Stripped and packed with xz -9e: half the size of `tar -cJ` on the unstripped files (the carry limit is 64 MiB).
pack() {  # pack <bin-dir> <out.tar.xz> <names...>
  local dir=$1 out=$2
  shift 2
  local staged
  staged=$(mktemp -d)
  for name in "$@"; do strip -o "$staged/$name" "$dir/$name"; done
  tar -C "$staged" -cf - "$@" | xz -9e -T0 >"$out"
  rm -rf "$staged"
}
if [ -n "${BINS:-}" ]; then
  # shellcheck disable=SC2086
  pack "$build/bin" .devrun/bin.tar.xz $BINS
else
  # shellcheck disable=SC2046
  pack "$build/bin" .devrun/bin.tar.xz $(cd "$build/bin" && ls)
fi
if [ -n "${2:-}" ]; then
  # shellcheck disable=SC2086
  pack "$2/bin" .devrun/old.tar.xz ${OLD_BINS:-train}
fi
cp -r ../shared .devrun/shared
cp /usr/share/datasets/fashion-mnist/*.gz .devrun/data/
du -sh .devrun
