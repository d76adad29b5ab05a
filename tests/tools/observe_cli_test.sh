#!/usr/bin/env bash
# End-to-end checks of what a run shows while and after it runs (issue 26, items 1-4), on small synthetic data
# (CPU): the --log windows, TensorBoard files read back by Google's protobuf runtime, the progress line (elapsed,
# ETA, totals under --max-steps, checkpoint lines), and compare's per-image, one-direction table.
#   observe_cli_test.sh <path to train>
set -uo pipefail
TRAIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3  # Debian's, with python3-protobuf and python3-crcmod (scripts/setup.sh installs them)
[ -x "$PY" ] || PY=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # check <description> <command...>
run=("$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 512 --model simple_cnn --batch 32 --workers 1)

# 1. 3 epochs of 16 steps stopped at step 40, a record every 7 steps, checkpoints every 20.
"${run[@]}" --epochs 3 --max-steps 40 --log "$work/m.jsonl" --log-every 7 --tensorboard "$work/tb" \
  --checkpoint-dir "$work/ck" --save-every 20 >"$work/run.log" 2>&1
check "a run with --log and --tensorboard exits 0" test $? -eq 0

# 2. The JSON lines: windows of their own, adding up to the run; an evaluation record per epoch.
cat >"$work/check_log.py" <<'EOF'
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in lines if r["kind"] == "train"]
evals = [r for r in lines if r["kind"] == "eval"]
def need(cond, what):
    if not cond:
        sys.exit(f"FAIL {what}: {lines}")
need([r["step"] for r in train] == [7, 14, 21, 28, 35, 40], "a record every 7 steps and one at the end")
need(sum(r["steps"] for r in train) == 40, "the windows' steps add up to the run's 40")
need(sum(r["images"] for r in train) == 40 * 32, "the windows' images add up to 40 x 32")
for r in train:
    need(math.isclose(r["images_per_s"], r["images"] / r["window_s"], rel_tol=1e-9), "images/s of the window")
    need(math.isclose(r["step_ms"], 1000 * r["window_s"] / r["steps"], rel_tol=1e-9), "step ms of the window")
    need(r["loss"] is not None and r["host_rss"] > 0, "loss and memory measured")
need(len({round(r["loss"], 6) for r in train}) == len(train), "each window has its own loss")
need(len({round(r["step_ms"], 6) for r in train}) > 1, "each window has its own step time")
# The windows tile the training time: the last one's elapsed time is theirs plus the evaluations before it.
evals_before = sum(r["eval_s"] for r in evals if lines.index(r) < lines.index(train[-1]))
need(abs(train[-1]["elapsed_s"] - sum(r["window_s"] for r in train) - evals_before) < 0.05,
     "windows cover the training time, evaluation left out")
need([(r["step"], r["epoch"]) for r in evals] == [(16, 0), (32, 1), (40, 2)], "an eval record per epoch")
need(all(0 <= r["accuracy"] <= 1 and r["test_loss"] > 0 and r["images"] == 85 for r in evals), "eval figures")
need(lines.index(train[-1]) < lines.index(evals[-1]), "the last window comes before the last evaluation")
EOF
check "the --log windows differ and add up to the run" "$PY" "$work/check_log.py" "$work/m.jsonl"

# 3. TensorBoard: one event file, read back with CRC checks and Google's protobuf, equal to the log.
events=$(ls "$work/tb"/events.out.tfevents.* 2>/dev/null)
check "--tensorboard writes one event file" test "$(echo "$events" | wc -w)" -eq 1
"$PY" "$HERE/read_tfevents.py" "$events" --jsonl "$work/m.jsonl" >"$work/tb.log" 2>&1
status=$?
if [ $status -eq 77 ]; then
  echo "skip TensorBoard read-back: $(cat "$work/tb.log")"
else
  check "the event file reads back and matches the log" test $status -eq 0
  check "... with the test set's figures" grep -q "test/accuracy: 3 values" "$work/tb.log"
fi

# 4. Progress: the last epoch's bar ends where --max-steps stops it; elapsed, ETA; one line per checkpoint.
check "the progress total honours --max-steps" grep -qE "^epoch 3/3 [0-9]+/8 " "$work/run.log"
check "... with elapsed time and an ETA" grep -qE "^epoch 2/3 .*\| elapsed [0-9]+:[0-9]{2} \| ETA [0-9]+:[0-9]{2}" \
  "$work/run.log"
check "a line says the checkpoint of step 20 was saved" \
  grep -q "^checkpoint saved: $work/ck/checkpoint-000000000020.safetensors (optimizer step 20)" "$work/run.log"
check "... and step 40's, once" test "$(grep -c 'checkpoint saved: .*(optimizer step 40)' "$work/run.log")" -eq 1
"${run[@]}" --epochs 3 --max-steps 10 --no-eval --no-profile >"$work/short.log" 2>&1
check "--max-steps inside the first epoch: one epoch of 10 steps" grep -qE "^epoch 1/1 [0-9]+/10 " "$work/short.log"

# 5. A --tensorboard path that cannot be a directory is a usage error before any work.
printf 'x' >"$work/a_file"
"${run[@]}" --epochs 1 --tensorboard "$work/a_file" >"$work/tbbad.log" 2>&1
check "--tensorboard on a file exits 2" test $? -eq 2
check "... naming it" grep -q -- "--tensorboard: cannot make the directory '$work/a_file'" "$work/tbbad.log"

# 6. compare: the same model at batch 32 and 16 side by side, per image, with the settings that differ.
COMPARE=$(dirname "$TRAIN")/compare
if [ -x "$COMPARE" ]; then
  one_epoch=("$TRAIN" --device cpu --data synthetic --synthetic-size 512 --model simple_cnn --workers 1 --epochs 1
             --no-eval)
  "${one_epoch[@]}" --threads 2 --batch 32 --report "$work/a.json" >"$work/a.log" 2>&1
  "${one_epoch[@]}" --threads 1 --batch 16 --report "$work/b.json" >"$work/b.log" 2>&1
  "$COMPARE" "$work/a.json" "$work/b.json" --html "$work/cmp.html" >"$work/cmp.log" 2>&1
  check "compare exits 0" test $? -eq 0
  check "... states the direction" grep -q "B relative to A throughout" "$work/cmp.log"
  check "... per image (A 32, B 16 images a step)" grep -q "(A 32, B 16)" "$work/cmp.log"
  check "... lists the batch among the settings that differ" grep -qE "^  batch +32 +16$" "$work/cmp.log"
  check "... and the CPU threads" grep -qE "^  CPU threads +2 +1$" "$work/cmp.log"
  check "... in one direction (no A/B column)" bash -c "! grep -q 'A/B' '$work/cmp.log'"
  check "the HTML page has the settings table" grep -q "<td>batch</td><td>32</td><td>16</td>" "$work/cmp.html"
fi

[ $fail -eq 0 ] && echo "all observe CLI checks passed"
exit $fail
