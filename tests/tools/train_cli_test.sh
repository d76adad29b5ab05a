#!/usr/bin/env bash
# End-to-end checks of the train tool on small synthetic data (CPU): exact resume, signals, flag errors.
#   train_cli_test.sh <path to train>
set -uo pipefail
TRAIN=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() {  # check <description> <command...>
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
run=("$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 512 --model simple_cnn --batch 32 --epochs 2
     --workers 1 --no-profile --no-eval)

# 1. Resume from a mid-epoch checkpoint ends bit-identical to the uninterrupted run.
"${run[@]}" --checkpoint-dir "$work/a" --save-every 5 --keep 0 >"$work/a.log" 2>&1
"${run[@]}" --checkpoint-dir "$work/b" --resume "$work/a/checkpoint-000000000010.safetensors" >"$work/b.log" 2>&1
check "resume from step 10 gives the same final checkpoint, byte for byte" \
  cmp -s "$work/a/checkpoint-000000000032.safetensors" "$work/b/checkpoint-000000000032.safetensors"
check "the resumed run says where it continued" grep -q "resumed from .*step 10, 10 micro-batches" "$work/b.log"

# 2. Resuming with a run-defining flag changed is a usage error naming the flag.
"${run[@]}" --lr 0.05 --resume "$work/a" >"$work/c.log" 2>&1
check "changed --lr on resume exits 2" test $? -eq 2
check "... and names lr" grep -q "flags differ.*lr" "$work/c.log"

# 3. SIGTERM: the run finishes its step, saves a checkpoint and exits 143.
"$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 4096 --model simple_cnn --batch 32 --epochs 50 \
  --workers 1 --no-profile --no-eval --checkpoint-dir "$work/s" >"$work/s.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "epoch 1/50" "$work/s.log" 2>/dev/null && break; sleep 0.1; done
sleep 1
kill -TERM $pid
wait $pid
check "SIGTERM exits 143" test $? -eq 143
check "SIGTERM left a checkpoint" bash -c "ls '$work/s'/checkpoint-*.safetensors >/dev/null 2>&1"
check "... and says so" grep -q "stopped by SIGTERM" "$work/s.log"

# 4. Bad flags and inputs: one line, the right exit code.
"$TRAIN" --batch 0 >"$work/e1.log" 2>&1
check "--batch 0 exits 2" test $? -eq 2
"$TRAIN" --data-dir "$work/nowhere" >"$work/e2.log" 2>&1
check "a missing data folder names the file" grep -q "nowhere/train-images-idx3-ubyte.gz" "$work/e2.log"
"$TRAIN" --model resnet9000 --data synthetic --synthetic-size 64 >"$work/e3.log" 2>&1
check "an unknown model exits 2" test $? -eq 2
printf 'not a checkpoint' >"$work/bad.safetensors"
"${run[@]}" --resume "$work/bad.safetensors" >"$work/e4.log" 2>&1
check "a corrupt checkpoint is refused naming the file" grep -q "bad.safetensors" "$work/e4.log"

# 5. --target-accuracy: stops at the first evaluation that reaches it, or says it was not reached.
evaluated=("$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 512 --model simple_cnn --batch 32
           --workers 1 --no-profile)
"${evaluated[@]}" --epochs 1 --target-accuracy 0.99 >"$work/t1.log" 2>&1
check "an unreached --target-accuracy exits 0" test $? -eq 0
check "... and says so" grep -q "target accuracy 99.00% not reached" "$work/t1.log"
"${run[@]}" --target-accuracy 0.5 --no-eval >"$work/t2.log" 2>&1
check "--target-accuracy with --no-eval exits 2" test $? -eq 2
check "... naming both flags" grep -q -- "--no-eval excludes --target-accuracy" "$work/t2.log"
"${evaluated[@]}" --epochs 2 --target-accuracy 0.0001 --checkpoint-dir "$work/t3" >"$work/t3.log" 2>&1
check "a reached --target-accuracy stops after epoch 1" grep -q "time to 0.01% test accuracy: .* (epoch 1;" "$work/t3.log"
check "... and saves the weights that reached it" test -f "$work/t3/checkpoint-000000000016.safetensors"

# 6. kill -USR1 prints every thread's stack and the run goes on to a normal end.
"$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 4096 --model simple_cnn --batch 32 --epochs 3 \
  --workers 1 --no-profile --no-eval >"$work/d.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "epoch 1/3" "$work/d.log" 2>/dev/null && break; sleep 0.1; done
kill -USR1 $pid
wait $pid
check "after SIGUSR1 the run still exits 0" test $? -eq 0
check "... having printed the stacks" grep -q "=== end of stacks" "$work/d.log"
check "... of more than one thread" test "$(grep -c '^--- thread' "$work/d.log")" -ge 2

# 7. bench: two runs and their reports side by side; a failing run is reported with its error.
BENCH=$(dirname "$TRAIN")/bench
if [ -x "$BENCH" ]; then
  "$BENCH" --model simple_cnn --data synthetic --synthetic-size 512 --workers 1 --a "--device cpu --threads 1" \
    --b "--device cpu --threads 2" --steps 6 --timing-warmup 2 --html "$work/cmp.html" >"$work/bench.log" 2>&1
  check "bench compares two runs" test $? -eq 0
  check "... stage by stage" grep -q "forward (host)" "$work/bench.log"
  check "... and writes the HTML chart" grep -q "<svg" "$work/cmp.html"
  "$BENCH" --data synthetic --synthetic-size 64 --a "--device cpu" --b "--batch 0" --steps 4 >"$work/bench2.log" 2>&1
  check "bench reports a failing run" test $? -eq 1
  check "... with its error" grep -q -- "--batch" "$work/bench2.log"
fi

[ $fail -eq 0 ] && echo "all train CLI checks passed"
exit $fail
