#!/usr/bin/env bash
# train's recipe flags and skip reporting end to end on the CPU (issues 23 item 6 and 27):
#   --on-bad-sample skip with the issue's folder (82 good files, a truncated PNG, a PNG whose header claims
#   100000x100000): the load-time line, the JSON list, the JSONL records, the report line; the same folder
#   over --max-bad-fraction stops with exit 1; --ema / --tta-flip / --lr-scale / --target-accuracy 94.
#   recipe_cli_test.sh <path to train>
set -uo pipefail
TRAIN=$1
EXPORT=$(dirname "$TRAIN")/export_images
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # check <description> <command...>

# 1. The issue's folder: 82 good training images in two classes, a truncated PNG, a 100000x100000 header.
if [ -x "$EXPORT" ]; then
  "$EXPORT" --data synthetic --out "$work/f/train" --count 82 --classes 2 --image-size 16 >/dev/null 2>&1
  "$EXPORT" --data synthetic --out "$work/f/test" --count 20 --classes 2 --image-size 16 --seed 1 >/dev/null 2>&1
  head -c 300 "$work/f/train/0/1.png" >"$work/f/train/0/trunc.png"
  printf '\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x01\x86\xa0\x00\x01\x86\xa0\x08\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00IEND\xaeB`\x82' \
    >"$work/f/train/1/huge.png"
  folder=("$TRAIN" --device cpu --threads 2 --data folder --data-dir "$work/f" --decode off --model simple_cnn
          --batch 8 --epochs 2 --workers 2 --on-bad-sample skip)
  "${folder[@]}" --max-bad-fraction 0.05 --report "$work/r.json" --log "$work/l.jsonl" >"$work/skip.log" 2>&1
  check "skipping 2 of 84 under --max-bad-fraction 0.05 exits 0" test $? -eq 0
  check "... the load-time line names the count and the first file with its reason" \
    grep -q "^  skipped 2 of 104 files (first: $work/f/train/0/trunc.png: a PNG chunk .*truncated file); full list in --report / --log)" "$work/skip.log"
  check "... the end-of-run report counts them" grep -q "^  skipped: 2 of 104 files (--on-bad-sample skip" "$work/skip.log"
  check "... the report JSON holds both with their reasons" python3 -c "
import json, sys
l = json.load(open('$work/r.json'))['loader']
files = {f['path'].rsplit('/', 1)[-1]: f for f in l['skipped_files']}
sys.exit(0 if l['files_total'] == 104 and set(files) == {'trunc.png', 'huge.png'}
         and '100000x100000' in files['huge.png']['reason'] and files['trunc.png']['found'] == 'load' else 1)"
  check "... and the JSONL log one record each" test "$(grep -c '"kind":"skipped_file"' "$work/l.jsonl")" -eq 2
  "${folder[@]}" --no-profile >"$work/over.log" 2>&1
  check "the same folder over the default --max-bad-fraction 0.01 exits 1" test $? -eq 1
  check "... naming the count and the first files" \
    grep -q "2 of 84 files in '$work/f/train' cannot be read (2.4%), more than --max-bad-fraction 0.01 allows; first: .*trunc.png: .*huge.png: " "$work/over.log"
  check "... before any training" bash -c "! grep -q 'epoch 1/2' '$work/over.log'"
  "$TRAIN" --device cpu --threads 2 --data folder --data-dir "$work/f" --decode off --model simple_cnn --batch 8 \
    --epochs 1 --workers 2 --on-bad-sample error --no-profile >"$work/err.log" 2>&1
  check "--on-bad-sample error still stops at a bad file (exit 1)" test $? -eq 1
  check "... naming it" grep -q "train: error: image '$work/f/train/.*\.png': " "$work/err.log"
fi

# 2. Recipe flags: EMA + flip averaging + LR scaling, a percentage target, EMA checkpointed and resumed.
run=("$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 256 --model simple_cnn --batch 64
     --epochs 2 --workers 1 --no-profile)
"${run[@]}" --ema 0.9 --tta-flip --lr-scale linear --target-accuracy 2 --checkpoint-dir "$work/c" >"$work/ema.log" 2>&1
check "--ema 0.9 --tta-flip --lr-scale linear runs" test $? -eq 0
check "... the header prints the scaled learning rate" grep -q "sgd lr 0.025 (0.1 x 64/256 by --lr-scale linear; onecycle)" "$work/ema.log"
check "... and what the evaluation uses" grep -q "evaluation: EMA of the weights (decay 0.9, .*; flip averaging" "$work/ema.log"
check "... the epoch line says so" grep -q "| test (EMA, flip-averaged) loss" "$work/ema.log"
check "... a percentage target reads as one, and both times print" \
  grep -q "time to 2.00% test accuracy: .* (epoch 1; .*); .* s of training alone (evaluation left out)" "$work/ema.log"
check "... the checkpoint holds the average" grep -qa '"extra/ema\.' "$work/c/checkpoint-000000000004.safetensors"
"${run[@]}" --ema 0.9 --lr-scale linear --resume "$work/c" >"$work/resume.log" 2>&1
check "resuming with the same --ema exits 0" test $? -eq 0
"${run[@]}" --resume "$work/c" >"$work/noema.log" 2>&1
check "resuming without --ema takes the checkpoint's EMA and scaling back" \
  grep -q "evaluation: EMA of the weights (decay 0.9" "$work/noema.log"
"${run[@]}" --ema 0.5 --lr-scale linear --resume "$work/c" >"$work/otherema.log" 2>&1
check "resuming with another --ema decay is refused naming it" grep -q "flags differ.*ema (checkpoint 0.9, now 0.5)" "$work/otherema.log"
"${run[@]}" --ema >"$work/default.log" 2>&1
check "--ema without a value takes 0.999" grep -q "EMA of the weights (decay 0.999," "$work/default.log"
"$TRAIN" --ema 1 >"$work/e1.log" 2>&1
check "--ema 1 is a usage error" test $? -eq 2
"$TRAIN" --ema-buffers average >"$work/e2.log" 2>&1
check "--ema-buffers without --ema is a usage error" test $? -eq 2
"$TRAIN" --target-accuracy 101 >"$work/e3.log" 2>&1
check "--target-accuracy 101 is a usage error" test $? -eq 2

[ $fail -eq 0 ] && echo "all recipe CLI checks passed"
exit $fail
