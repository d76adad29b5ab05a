#!/usr/bin/env bash
# Runs on the lent GPU machine from the repo root (see scripts/pack_device_run.sh): unpacks the executables,
# then runs the named stages, writing logs to $OUT and a short table at the end.
#   scripts/device_checks.sh tests doctor accuracy bench
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/bin
tar -C /tmp/bin -xJf .devrun/bin.tar.xz
source .devrun/shared/device-env.sh
export PYTHONUNBUFFERED=1
DATA=.devrun/data
summary=()
note() { summary+=("$1"); echo "== $1"; }

for stage in "$@"; do
  case "$stage" in
    tests)
      for t in /tmp/bin/test_*; do
        name=$(basename "$t")
        "$t" --gtest_brief=1 >"$OUT/$name.log" 2>&1
        rc=$?
        note "$name: rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$name.log" | tr '\n' ' ')"
        [ $rc -ne 0 ] && grep -E "FAILED|Failure|error" "$OUT/$name.log" | head -20
      done
      ;;
    doctor)
      /tmp/bin/doctor >"$OUT/doctor.log" 2>&1
      note "doctor: rc=$? $(grep verdict "$OUT/doctor.log")"
      cat "$OUT/doctor.log"
      ;;
    accuracy)
      /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --epochs ${EPOCHS:-15} --batch 256 \
        --lr 0.2 --label-smoothing 0.1 >"$OUT/accuracy.log" 2>&1
      note "accuracy: rc=$? $(tail -1 "$OUT/accuracy.log")"
      tail -4 "$OUT/accuracy.log"
      ;;
    bench)
      # Liftoff and PyTorch side by side: ResNet-20 fp32 at batch 256 and at batch 16 x accum 4.
      for cfg in "256 1 60" "16 4 150"; do
        set -- $cfg
        /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --batch $1 --accum $2 --max-steps $3 \
          --timing-warmup 10 --no-eval --epochs 100 >"$OUT/bench_liftoff_$1x$2.log" 2>&1
        lo=$(grep -o 'steady state [0-9.]* images/s' "$OUT/bench_liftoff_$1x$2.log")
        python3 tools/reference/train_reference.py --device cuda --data-dir $DATA --batch $1 --accum $2 \
          --steps $(( $3 - 10 )) --warmup-steps 10 >"$OUT/bench_torch_$1x$2.log" 2>&1
        pt=$(grep RESULT "$OUT/bench_torch_$1x$2.log")
        note "bench b$1 x$2: liftoff [$lo] pytorch [$pt]"
      done
      ;;
    *) echo "unknown stage $stage" ;;
  esac
done
echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
