#!/usr/bin/env bash
# Packs what a run on the lent GPU machine needs into .devrun/ (git-ignored; carried by the device tool):
# the built executables (compressed), a copy of ../shared and the Fashion-MNIST files.
#   scripts/pack_device_run.sh [build-dir] [baseline-build-dir]
# BINS (space-separated names) limits the executables packed (default: all); a baseline build's `train` goes to
# .devrun/old.tar.xz for before/after comparisons in one call.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf .devrun && mkdir -p .devrun/data
if [ -n "${BINS:-}" ]; then
  # shellcheck disable=SC2086
  tar -C "$build/bin" -cJf .devrun/bin.tar.xz $BINS
else
  tar -C "$build/bin" -cJf .devrun/bin.tar.xz .
fi
if [ -n "${2:-}" ]; then
  tar -C "$2/bin" -cJf .devrun/old.tar.xz train
fi
cp -r ../shared .devrun/shared
cp /usr/share/datasets/fashion-mnist/*.gz .devrun/data/
du -sh .devrun
