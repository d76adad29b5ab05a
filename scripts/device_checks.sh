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
      # Every suite; one combined log (the device tool returns at most 8 files).
      for t in /tmp/bin/test_*; do
        name=$(basename "$t")
        case "$name" in test_distributed_mpi*) continue ;; esac  # ctest runs these under mpirun
        echo "######## $name" >>"$OUT/tests.log"
        "$t" --gtest_brief=1 >>"$OUT/tests.log" 2>&1
        rc=$?
        note "$name: rc=$rc $(tail -3 "$OUT/tests.log" | grep -E '(PASSED|FAILED|SKIPPED)' | tr '\n' ' ')"
      done
      grep -B2 -A6 -E "^\[  FAILED  \]|Failure$" "$OUT/tests.log" | head -80
      ;;
    sanitize)
      # The loader's GPU stress and parity tests under compute-sanitizer (memcheck, then racecheck).
      for tool in memcheck racecheck; do
        timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/test_data_cuda --gtest_brief=1 \
          >>"$OUT/sanitize.log" 2>&1
        note "compute-sanitizer $tool test_data_cuda: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitize.log" | tail -1)"
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
      # Liftoff and PyTorch side by side: ResNet-20 at batch 256 and 16 x accum 4, fp32 / bf16 / fp16.
      for cfg in "256 1 off 200" "16 4 off 200" "256 1 bf16 200" "16 4 bf16 200" "256 1 fp16 200"; do
        set -- $cfg
        tag="b$1x$2-$3"
        /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --batch $1 --accum $2 --amp $3 \
          --max-steps $4 --timing-warmup 20 --no-eval --epochs 100 >>"$OUT/bench.log" 2>&1
        lo=$(grep -o 'steady state [0-9.]* images/s' "$OUT/bench.log" | tail -1)
        cl=""; [ "$3" != off ] && cl="--channels-last"
        python3 tools/reference/train_reference.py --device cuda --data-dir $DATA --batch $1 --accum $2 --amp $3 \
          $cl --steps $(( $4 - 20 )) --warmup-steps 20 >>"$OUT/bench.log" 2>&1
        pt=$(grep RESULT "$OUT/bench.log" | tail -1)
        note "bench $tag: liftoff [$lo] pytorch [$pt]"
      done
      ;;
    loader)
      # Data stage hidden? Real data + GPU augmentation vs synthetic; then CPU augmentation and pageable memory.
      for cfg in "fashion-mnist auto pin" "synthetic auto pin" "fashion-mnist cpu pin" "fashion-mnist auto nopin" \
                 "fashion-mnist cpu nopin"; do
        set -- $cfg
        pin="--pin-memory"; [ "$3" = nopin ] && pin="--no-pin-memory"
        /tmp/bin/train --device cuda --data $1 --synthetic-size 60000 --data-dir $DATA --batch 256 --augment $2 $pin \
          --max-steps 230 --timing-warmup 30 --no-eval --epochs 100 >>"$OUT/loader.log" 2>&1
        note "loader $1 augment=$2 $3: $(grep -o 'steady state [0-9.]* images/s' "$OUT/loader.log" | tail -1) | $(grep 'verdict' "$OUT/loader.log" | tail -1 | cut -c1-150)"
      done
      ;;
    amp_accuracy)
      for amp in off bf16 fp16; do
        /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --epochs ${EPOCHS:-15} --batch 256 \
          --lr 0.2 --label-smoothing 0.1 --amp $amp --report "$OUT/acc_$amp.json" >>"$OUT/amp_accuracy.log" 2>&1
        note "accuracy amp=$amp: $(grep '^done' "$OUT/amp_accuracy.log" | tail -1 | grep -o 'final test accuracy .*') | $(grep -E 'memory|amp:' "$OUT/amp_accuracy.log" | tail -2 | tr '\n' ' ')"
      done
      ;;
    overhead)
      # Profiling on vs off, same recipe, interleaved twice (issue: utilization report, within 2%).
      for round in 1 2; do
        for prof in --profile --no-profile; do
          /tmp/bin/train --device cuda --data-dir $DATA --batch 256 $prof --max-steps 230 --timing-warmup 30 --no-eval \
            --epochs 100 >>"$OUT/overhead.log" 2>&1
          note "overhead b256 $prof: $(grep -o 'steady state [0-9.]* images/s' "$OUT/overhead.log" | tail -1)"
          /tmp/bin/train --device cuda --data-dir $DATA --batch 16 --accum 4 $prof --max-steps 150 --timing-warmup 20 \
            --no-eval --epochs 100 >>"$OUT/overhead.log" 2>&1
          note "overhead b16x4 $prof: $(grep -o 'steady state [0-9.]* images/s' "$OUT/overhead.log" | tail -1)"
        done
      done
      ;;
    *) echo "unknown stage $stage" ;;
  esac
done
echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
