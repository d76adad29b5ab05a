#!/usr/bin/env bash
# Packs what a run on the lent GPU machine needs into .devrun/ (git-ignored; carried by the device tool):
# the built executables (compressed), a copy of ../shared and the Fashion-MNIST files.
#   scripts/pack_device_run.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf .devrun && mkdir -p .devrun/data
tar -C "$build/bin" -cJf .devrun/bin.tar.xz .
cp -r ../shared .devrun/shared
cp /usr/share/datasets/fashion-mnist/*.gz .devrun/data/
du -sh .devrun
