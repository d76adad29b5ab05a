#!/usr/bin/env bash
# Runs each libFuzzer harness for a bounded time, one after the other, starting from its seed corpus.
#   tests/fuzz/run_fuzzers.sh [build dir (default build-fuzz)] [seconds per fuzzer (default 60)] [names...]
# Build first (clang + libFuzzer, see tests/fuzz/CMakeLists.txt):
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DLIFTOFF_FUZZ=ON -DLIFTOFF_CUDA=OFF -DLIFTOFF_BUILD_TOOLS=OFF
#   ninja -C build-fuzz idx_fuzz safetensors_fuzz image_fuzz
# New interesting inputs go to a scratch corpus (build dir), never into the committed seeds; a crash leaves
# crash-<sha1> in the scratch directory and makes the script exit 1. Copy a crash file into corpus/<name>/ once
# fixed, so the replay tests (ctest -R fuzz_replay) keep it fixed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-build-fuzz}"
seconds="${2:-60}"
shift $(( $# > 2 ? 2 : $# ))
names=("$@")
if [ ${#names[@]} -eq 0 ]; then names=(idx safetensors image); fi

status=0
for name in "${names[@]}"; do
  bin="$build/bin/${name}_fuzz"
  if [ ! -x "$bin" ]; then
    echo "run_fuzzers: $bin not built (skipping $name)" >&2
    continue
  fi
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  work="$build/fuzz-work/$name"
  mkdir -p "$work/corpus"
  echo "== $name: ${seconds}s from $here/corpus/$name"
  # -rss_limit_mb / -timeout: an input that needs > 2 GB or > 10 s is a bug of its own.
  if ! (cd "$work" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 corpus "$here/corpus/$name" 2>&1 | tail -n 25); then
    echo "run_fuzzers: $name found a problem, see $work" >&2
    status=1
  fi
done
exit $status
