#!/usr/bin/env bash
# End-to-end checks of the train tool on small synthetic data (CPU): exact resume, signals, flag errors.
#   train_cli_test.sh <path to train>
set -uo pipefail
TRAIN=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # check <description> <command...>
run=("$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 512 --model simple_cnn --batch 32 --epochs 2
     --workers 1 --no-profile --no-eval)

# 1. Resume from a mid-epoch checkpoint ends bit-identical to the uninterrupted run.
"${run[@]}" --checkpoint-dir "$work/a" --save-every 5 --keep 0 >"$work/a.log" 2>&1
"${run[@]}" --checkpoint-dir "$work/b" --resume "$work/a/checkpoint-000000000010.safetensors" >"$work/b.log" 2>&1
check "resume from step 10 gives the same final checkpoint, byte for byte" \
  cmp -s "$work/a/checkpoint-000000000032.safetensors" "$work/b/checkpoint-000000000032.safetensors"
check "the resumed run says where it continued" grep -q "resumed from .*step 10, 10 micro-batches" "$work/b.log"
check "... and times its steady state after its own first 5 steps" \
  grep -qE "steady state [0-9.]+ images/s \(after the first 5 steps" "$work/b.log"

# 2. Resuming with a run-defining flag changed is a usage error naming the flag.
"${run[@]}" --lr 0.05 --resume "$work/a" >"$work/c.log" 2>&1
check "changed --lr on resume exits 2" test $? -eq 2
check "... and names lr" grep -q "flags differ.*lr" "$work/c.log"

# 3. SIGTERM: the run finishes its step, saves a checkpoint and exits 143.
"$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 4096 --model simple_cnn --batch 32 --epochs 50 \
  --workers 1 --no-profile --no-eval --checkpoint-dir "$work/s" >"$work/s.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "epoch 1/50" "$work/s.log" 2>/dev/null && break; sleep 0.1; done
# Meanwhile a second run into the same directory is refused: the first holds its lock (issue 25).
"${run[@]}" --checkpoint-dir "$work/s" >"$work/s2.log" 2>&1
check "a second run into a directory in use exits 1" test $? -eq 1
check "... naming the run that holds it" grep -q "checkpoint directory '$work/s' is in use by another run (pid $pid" "$work/s2.log"
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
"${evaluated[@]}" --epochs 3 --eval-every 2 --target-accuracy 0.0001 >"$work/t4.log" 2>&1
check "--eval-every 2 skips epoch 1's evaluation" bash -c "! grep -q '^epoch 1/3.*| test' '$work/t4.log'"
check "... and stops at epoch 2's" grep -q "time to 0.01% test accuracy: .* (epoch 2;" "$work/t4.log"
"${evaluated[@]}" --epochs 3 --eval-every 2 >"$work/t5.log" 2>&1
check "--eval-every 2 evaluates the last epoch (3)" grep -q "^epoch 3/3.*| test" "$work/t5.log"
check "... and not epoch 1" bash -c "! grep -q '^epoch 1/3.*| test' '$work/t5.log'"
"${evaluated[@]}" --epochs 1 --tta-flip --tta-shift >"$work/t6.log" 2>&1
check "--tta-flip --tta-shift evaluates the averaged views" grep -q "| test (flip-averaged, shift-averaged) loss" "$work/t6.log"

# 6. kill -USR1 prints every thread's stack, named and symbolised, and the run goes on to a normal end.
"$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 4096 --model simple_cnn --batch 32 --epochs 3 \
  --workers 1 --no-profile --no-eval >"$work/d.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "epoch 1/3" "$work/d.log" 2>/dev/null && break; sleep 0.1; done
kill -USR1 $pid
wait $pid
check "after SIGUSR1 the run still exits 0" test $? -eq 0
check "... having printed the stacks" grep -q "=== end of stacks" "$work/d.log"
check "... of more than one thread" test "$(grep -c '^--- thread' "$work/d.log")" -ge 2
check "... with function names (train is linked with -rdynamic)" grep -q "(main+0x" "$work/d.log"
check "... including the library's own" grep -q "(_ZN7liftoff.*+0x" "$work/d.log"
check "... and the loader's worker named" grep -q "^--- thread [0-9]* (lo-worker-0)" "$work/d.log"
if command -v c++filt >/dev/null; then
  check "... demangled by c++filt as the dump says" grep -q "(liftoff::" <(c++filt <"$work/d.log")
fi

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

# 8. Issue 25: nothing saved is lost or silently wrong; bad flags and data refused before training starts.
# 8a. A new run pointed at another run's directory leaves its checkpoints alone.
before=$(ls "$work/a" | sort | md5sum)
"${run[@]}" --checkpoint-dir "$work/a" --keep 1 >"$work/o.log" 2>&1
check "a new run in another run's --checkpoint-dir exits 1" test $? -eq 1
check "... saying whose they are and how to continue" grep -q "holds checkpoints of another run (run .*--resume" "$work/o.log"
check "... and prunes nothing" test "$(ls "$work/a" | sort | md5sum)" = "$before"
# 8b. --resume DIR passes over a damaged newest checkpoint, says which and why, and continues exactly.
mkdir -p "$work/f" && cp "$work/a"/checkpoint-*.safetensors "$work/f/"
newest="$work/f/checkpoint-000000000032.safetensors"
printf '\x7f' | dd of="$newest" bs=1 seek=$(( $(stat -c %s "$newest") - 9 )) conv=notrunc 2>/dev/null
"${run[@]}" --checkpoint-dir "$work/f2" --resume "$work/f" >"$work/f.log" 2>&1
check "--resume past a damaged newest checkpoint exits 0" test $? -eq 0
check "... naming the file it passed over and why" \
  grep -q "passed over a newer checkpoint: checkpoint '$newest': header, metadata or tensor data were changed" "$work/f.log"
check "... and the one it fell back to" grep -q "falling back to $work/f/checkpoint-000000000030.safetensors" "$work/f.log"
check "... ending byte-identical to the uninterrupted run" \
  cmp -s "$work/a/checkpoint-000000000032.safetensors" "$work/f2/checkpoint-000000000032.safetensors"
# 8c. A dtype edited in the header ("F32" -> "I32", same length) is refused, not trained from.
cp "$work/a/checkpoint-000000000010.safetensors" "$work/edited.safetensors"
sed -i 's/"F32"/"I32"/' "$work/edited.safetensors"
"${run[@]}" --resume "$work/edited.safetensors" >"$work/ed.log" 2>&1
check "a checkpoint with an edited header is refused (exit 1)" test $? -eq 1
check "... naming the file" grep -q "edited.safetensors': header, metadata or tensor data were changed" "$work/ed.log"
# 8d. A lock left by a dead process is taken over, with a note; --resume alone saves where it resumed.
"${run[@]}" --checkpoint-dir "$work/k" >/dev/null 2>&1
echo "pid 999999 on elsewhere, run gone" >"$work/k/liftoff-run.lock"
"${run[@]}" --resume "$work/k" >"$work/k.log" 2>&1
check "a stale lock is taken over" grep -q "took over the lock of checkpoint directory '$work/k' from a process that is gone (pid 999999" "$work/k.log"
check "... and released at the end" test ! -e "$work/k/liftoff-run.lock"
check "--resume without --checkpoint-dir says where it saves" grep -q "checkpoints go on being saved in '$work/k'" "$work/k.log"
# 8e. Flags: non-finite numbers, negative seeds, derived values, unwritable outputs, orphan checkpoint flags.
expect_usage_error() {  # expect_usage_error <message fragment> <flags...>
  local what=$1
  shift
  "${run[@]}" "$@" >"$work/u.log" 2>&1
  local rc=$?
  check "$* exits 2" test $rc -eq 2
  check "... saying: $what" grep -qF -- "$what" "$work/u.log"
}
expect_usage_error "--lr: 'nan' is not a finite number" --lr nan
expect_usage_error "--wd: 'inf' is not a finite number" --wd inf
expect_usage_error "--seed: '-1' is not an integer in [0, 2^64-1]" --seed -1
expect_usage_error "--report: cannot write '/tmp': is a directory" --report /tmp
expect_usage_error "--log: cannot write '$work/no/such/dir/log.jsonl': No such file or directory" --log "$work/no/such/dir/log.jsonl"
expect_usage_error "--save-every: needs --checkpoint-dir" --save-every 5
expect_usage_error "--keep: needs --checkpoint-dir" --keep 2
"$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 256 --model simple_cnn --batch 32 --epochs 1 \
  --workers 256 --no-profile --no-eval >"$work/w.log" 2>&1
check "--workers 256 runs (its default --prefetch is capped at 256)" test $? -eq 0
check "... and says so" grep -q "loader: 256 workers, prefetch 256" "$work/w.log"
# 8f. Memory: a batch that cannot fit is refused before the first step with the numbers, also under ulimit -v.
(ulimit -v 4000000; "$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 8192 --model resnet20 \
  --batch 1048576 --no-drop-last --epochs 2 --schedule constant --workers 1 --no-profile --no-eval >"$work/m.log" 2>&1)
check "a huge --batch under ulimit -v exits 1, not killed" test $? -eq 1
check "... with the estimate, the limit and the flag that helps" \
  grep -q "a training step on the CPU needs about .* are available (ulimit -v); use --batch [0-9]* or less" "$work/m.log"
# 8g. Data sets: test images of another size, and one-class folders, refused before training.
be32() { printf "\\$(printf %03o $(($1 >> 24 & 255)))\\$(printf %03o $(($1 >> 16 & 255)))\\$(printf %03o $(($1 >> 8 & 255)))\\$(printf %03o $(($1 & 255)))"; }
idx() {  # idx <file.gz> <count> <rows> <cols>: IDX images (random) or, with rows 0, labels 0..9
  {
    if [ "$3" -eq 0 ]; then
      printf '\x00\x00\x08\x01'; be32 "$2"
      for i in $(seq "$2"); do printf "\\x0$((i % 10))"; done
    else
      printf '\x00\x00\x08\x03'; be32 "$2"; be32 "$3"; be32 "$4"
      head -c $(($2 * $3 * $4)) /dev/urandom
    fi
  } | gzip >"$1"
}
mkdir -p "$work/mn"
idx "$work/mn/train-images-idx3-ubyte.gz" 64 28 28; idx "$work/mn/train-labels-idx1-ubyte.gz" 64 0 0
idx "$work/mn/t10k-images-idx3-ubyte.gz" 16 32 32; idx "$work/mn/t10k-labels-idx1-ubyte.gz" 16 0 0
"$TRAIN" --device cpu --data mnist --data-dir "$work/mn" --model simple_cnn --batch 8 --epochs 1 --workers 1 \
  --no-profile >"$work/mn.log" 2>&1
check "test images of another size are refused before training" \
  grep -q "the test images are \[1, 32, 32\] (channels, height, width) but the training images are \[1, 28, 28\]" "$work/mn.log"
check "... (no epoch ran)" bash -c "! grep -q 'epoch 1/1' '$work/mn.log'"
EXPORT=$(dirname "$TRAIN")/export_images
if [ -x "$EXPORT" ]; then
  "$EXPORT" --data synthetic --out "$work/one/train" --count 8 --classes 1 --image-size 8 >/dev/null 2>&1
  "$EXPORT" --data synthetic --out "$work/one/test" --count 4 --classes 1 --image-size 8 >/dev/null 2>&1
  "$TRAIN" --device cpu --data folder --data-dir "$work/one" --model simple_cnn --batch 4 --epochs 1 --workers 1 \
    --no-profile >"$work/one.log" 2>&1
  check "a one-class folder is refused (exit 2)" test $? -eq 2
  check "... saying a classifier needs 2 classes" grep -q "has 1 class ('0'); a classifier needs at least 2" "$work/one.log"
  # A folder the workers decode for a CUDA run gets half the cores (4 to 8) by default, a CPU run 4 (the
  # model's threads need the cores); --print-config keeps the default, 0.
  "$EXPORT" --data synthetic --out "$work/two/train" --count 8 --classes 2 --image-size 8 >/dev/null 2>&1
  "$EXPORT" --data synthetic --out "$work/two/test" --count 4 --classes 2 --image-size 8 >/dev/null 2>&1
  "$TRAIN" --device cpu --data folder --data-dir "$work/two" --model simple_cnn --batch 4 --epochs 1 --max-steps 1 \
    --no-profile --no-eval >"$work/two.log" 2>&1
  check "a CPU run's default --workers is 4" grep -q "loader: 4 workers" "$work/two.log"
  "$TRAIN" --data folder --data-dir "$work/two" --print-config >"$work/two.toml" 2>&1
  check "... and --print-config writes the default (auto) as 0" grep -q "^workers = 0" "$work/two.toml"
fi
# 8h. compare bounds what it reads: /dev/zero ends with an error instead of growing until killed.
COMPARE=$(dirname "$TRAIN")/compare
if [ -x "$COMPARE" ]; then
  timeout 60 "$COMPARE" /dev/zero /dev/zero >"$work/cz.log" 2>&1
  check "compare /dev/zero exits 1" test $? -eq 1
  check "... at the size limit" grep -q "report '/dev/zero': larger than the limit of" "$work/cz.log"
fi

# 9. One throughput figure (issue 23): the table, the done line, the JSON and compare show the same number.
"$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 1000 --model simple_cnn --batch 32 --epochs 1 \
  --workers 1 --no-eval --report "$work/tp.json" >"$work/tp.log" 2>&1
table=$(grep -oE 'throughput [0-9.]+ images/s' "$work/tp.log" | grep -oE '[0-9.]+')
done_line=$(grep -oE 'steady state [0-9.]+ images/s' "$work/tp.log" | grep -oE '[0-9.]+')
json_figure=$(python3 -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))['steps']['images_per_s'])" "$work/tp.json" 2>/dev/null)
check "the table states a throughput" test -n "$table"
check "... the done line the same ($done_line)" test "$done_line" = "$table"
check "... the JSON the same ($json_figure)" test "$json_figure" = "$table"
if [ -x "$COMPARE" ]; then
  "$COMPARE" "$work/tp.json" "$work/tp.json" >"$work/tpc.log" 2>&1
  check "... and compare the same" grep -qE "^  images/s +$table +$table " "$work/tpc.log"
fi
check "the epoch line's own figure says it holds the warm-up steps" grep -qE "^epoch 1/1: .* img/s \(.* steps, warm-up included\)" "$work/tp.log"

# 10. --drop-last (default): 1000 / 32 leaves 8 images out, 31 steps; --no-drop-last trains on them (32 steps).
check "drop-last is the default: 31 steps of 32" grep -q "done: 31 optimizer steps, 992 images" "$work/tp.log"
"$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 1000 --model simple_cnn --batch 32 --epochs 1 \
  --workers 1 --no-eval --no-profile --no-drop-last >"$work/nd.log" 2>&1
check "--no-drop-last keeps the tail: 32 steps, 1000 images" grep -q "done: 32 optimizer steps, 1000 images" "$work/nd.log"
"$TRAIN" --device cpu --data synthetic --synthetic-size 100 --batch 128 --epochs 1 --no-profile >"$work/big.log" 2>&1
check "a batch larger than the data set with drop-last exits 2" test $? -eq 2
check "... naming --no-drop-last" grep -q -- "--no-drop-last" "$work/big.log"

# 11. A 2-step smoke test runs with the default one-cycle schedule (a note says how), and the verdict says the
#     run is too short to judge instead of guessing.
"$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 512 --model simple_cnn --batch 32 \
  --workers 1 --no-eval --max-steps 2 >"$work/s2.log" 2>&1
check "--max-steps 2 exits 0" test $? -eq 0
check "... with the schedule's note, once" test "$(grep -c 'onecycle: 2 steps are too few' "$work/s2.log")" -eq 1
check "... and a verdict of too short to judge" grep -q "verdict: unknown: too short to judge: 2 steps" "$work/s2.log"

[ $fail -eq 0 ] && echo "all train CLI checks passed"
exit $fail
