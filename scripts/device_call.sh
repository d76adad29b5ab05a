#!/usr/bin/env bash
# Runs on the lent GPU machine from the repo root, after scripts/pack_device_run.sh staged .devrun/:
# unpacks the executables (and .devrun/old.tar.xz, a baseline build, when present), then runs the named stages,
# logging to $OUT and printing a short table last.
#   scripts/device_call.sh gpu_tests ab_resnet20 ...
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/bin /tmp/old
tar -C /tmp/bin -xJf .devrun/bin.tar.xz
[ -f .devrun/old.tar.xz ] && tar -C /tmp/old -xJf .devrun/old.tar.xz
source .devrun/shared/device-env.sh
export PYTHONUNBUFFERED=1 LIFTOFF_SOURCE_DIR=$PWD  # tests find their data files from the tree
DATA=.devrun/data
summary=()
# Each note also goes to $OUT/summary.log, so a call killed at its time limit keeps the notes so far.
note() { summary+=("$1"); echo "== $1"; echo "$1" >>"$OUT/summary.log"; }
steady() { grep -oE "steady state[^;]*images/s|[0-9.,]+ images/s \(steady" "$1" | head -1; }

for stage in "$@"; do
  case "$stage" in
    gpu_tests)
      for t in ${GTESTS:-test_ops_cuda test_models_cuda test_runtime_cuda test_data_cuda test_distributed_cuda}; do
        [ -x /tmp/bin/$t ] || continue
        timeout 420 /tmp/bin/$t --gtest_brief=1 ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} >"/tmp/$t.log" 2>&1
        note "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "/tmp/$t.log" | tr '\n' ' ')"
        # One combined log (the device tool returns at most 8 files); failures with their first lines.
        { echo "######## $t"; cat "/tmp/$t.log"; } >>"$OUT/gpu_tests.log"
        grep -B1 -A6 -m 12 "Failure$" "/tmp/$t.log" | head -60
      done
      ;;
    ab_resnet20)
      # Before/after the change (old = baseline build), resnet20, two configurations, alternating rounds.
      for round in 1 2; do
        for cfg in "--batch 16 --accum 4" "--batch 256 --amp bf16"; do
          for b in old bin; do
            [ -x /tmp/$b/train ] || continue
            log="$OUT/ab_${b}.log"
            echo "#### $b $cfg round $round" >>"$log"
            /tmp/$b/train --device cuda --model resnet20 --data-dir $DATA $cfg --max-steps 300 --timing-warmup 20 \
              --no-eval >>"$log" 2>&1
            note "ab $b [$cfg] r$round: $(grep -E '^done:' "$log" | tail -1 | grep -oE 'steady[^)]*' | head -1)"
          done
        done
      done
      ;;
    *)
      if [ -f "scripts/device_stage_$stage.sh" ]; then source "scripts/device_stage_$stage.sh"; else note "unknown stage $stage"; fi
      ;;
  esac
done
echo; echo "================ summary"; printf '%s\n' "${summary[@]}"
