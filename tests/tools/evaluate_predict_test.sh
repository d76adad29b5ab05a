#!/usr/bin/env bash
# End-to-end checks of evaluate and predict (CPU): a short train run on the real Fashion-MNIST writes a
# checkpoint that evaluate scores like train's own evaluation (with --ema and --tta-flip too); a PNG class
# folder trains, and predict ranks its images.
#   evaluate_predict_test.sh <folder with train, evaluate, predict, export_images>
set -uo pipefail
BIN=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # check <description> <command...>
json() {  # json <file> <python expression over j>: exit 0 when it is true
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}

# 1. Fashion-MNIST: train's last evaluation and evaluate agree (same weights, same test set).
if [ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]; then
  "$BIN/train" --device cpu --threads 2 --model strided_cnn --batch 64 --epochs 1 --max-steps 30 --workers 1 \
    --no-profile --checkpoint-dir "$work/fm" >"$work/fm.log" 2>&1
  check "a short Fashion-MNIST run exits 0" test $? -eq 0
  "$BIN/evaluate" "$work/fm" --device cpu --json "$work/fm.json" >"$work/e.log" 2>&1
  check "evaluate exits 0" test $? -eq 0
  train_acc=$(sed -n 's/.*test loss [0-9.]*, accuracy \([0-9.]*\)%.*/\1/p' "$work/fm.log" | tail -1)
  check "evaluate's accuracy is train's last evaluation ($train_acc%)" grep -q "accuracy $train_acc%" "$work/e.log"
  check "... on the 10000 test images" json "$work/fm.json" "j['images'] == 10000 and j['split'] == 'test'"
  check "... with a confusion matrix whose rows are the per-class counts" json "$work/fm.json" \
    "[sum(r) for r in j['confusion']] == j['per_class_images'] and sum(j['per_class_images']) == 10000"
  check "... and per-class accuracies from its diagonal" json "$work/fm.json" \
    "all(abs(j['per_class_accuracy'][c] - j['confusion'][c][c] / j['per_class_images'][c]) < 1e-12 for c in range(10))"
  check "... overall accuracy from its trace" json "$work/fm.json" \
    "abs(j['accuracy'] - sum(j['confusion'][c][c] for c in range(10)) / 10000) < 1e-12"
  check "... naming Fashion-MNIST's classes" json "$work/fm.json" "j['classes'][9] == 'Ankle boot'"
  "$BIN/evaluate" "$work/fm" --device cpu --split train --json - >"$work/tr.json" 2>"$work/tr.err"
  check "--split train evaluates the 60000 training images" json "$work/tr.json" "j['images'] == 60000"
else
  echo "skip Fashion-MNIST checks: dataset-fashion-mnist is not installed"
fi

# 2. A PNG class folder: train on it, evaluate on its test half, predict its images.
"$BIN/export_images" --data synthetic --count 120 --classes 3 --image-size 16 --out "$work/png/train" >/dev/null
"$BIN/export_images" --data synthetic --count 30 --classes 3 --image-size 16 --seed 1 --out "$work/png/test" \
  >/dev/null
"$BIN/train" --device cpu --threads 2 --data folder --data-dir "$work/png" --decode off --model strided_cnn \
  --batch 16 --epochs 1 --workers 1 --no-profile --checkpoint-dir "$work/pf" >"$work/pf.log" 2>&1
check "training on a PNG folder exits 0" test $? -eq 0
"$BIN/evaluate" "$work/pf" --device cpu --json - >"$work/pf.json" 2>"$work/pf.err"
check "evaluate on the folder's test images" json "$work/pf.json" "j['images'] == 30 and len(j['confusion']) == 3"
classes=$(ls "$work/png/train" | tr '\n' ' ')
check "... naming the class folders ($classes)" json "$work/pf.json" "' '.join(j['classes']) + ' ' == '$classes'"
"$BIN/predict" "$work/pf" "$work/png/test" --device cpu -k 2 >"$work/p.csv" 2>"$work/p.err"
check "predict on a folder exits 0" test $? -eq 0
check "... one CSV row per image and rank" test "$(wc -l <"$work/p.csv")" -eq $((1 + 30 * 2))
check "... with the header" grep -qx "file,rank,class,index,probability" "$work/p.csv"
one=$(ls "$work/png/test"/*/* | head -1)
"$BIN/predict" "$work/pf/" "$one" --device cpu --format json -k 3 >"$work/p.json" 2>>"$work/p.err"
check "predict --format json: the file, 3 classes, probabilities in order and summing to 1" json "$work/p.json" \
  "len(j) == 1 and j[0]['file'] == '$one' and len(j[0]['top']) == 3 and \
   all(a['probability'] >= b['probability'] for a, b in zip(j[0]['top'], j[0]['top'][1:])) and \
   abs(sum(t['probability'] for t in j[0]['top']) - 1) < 1e-4"
check "... the same top class as the CSV's rank-1 row for that file" json "$work/p.json" \
  "[r[2] for r in __import__('csv').reader(open('$work/p.csv')) if r[0] == '$one' and r[1] == '1'] == [j[0]['top'][0]['class']]"

# 3. A run with --ema and test-time views: evaluate scores what train's evaluation scored (the EMA of the
#    weights, image + mirror) unless told otherwise; predict takes the same weights.
"$BIN/train" --device cpu --threads 2 --data synthetic --synthetic-size 256 --model simple_cnn --batch 32 \
  --epochs 1 --workers 1 --no-profile --ema 0.9 --tta-flip --tta-shift --checkpoint-dir "$work/ema" \
  >"$work/ema.log" 2>&1
check "a run with --ema --tta-flip --tta-shift exits 0" test $? -eq 0
train_loss=$(sed -n 's/.*test (EMA, flip-averaged, shift-averaged) loss \([0-9.]*\),.*/\1/p' "$work/ema.log" | tail -1)
"$BIN/evaluate" "$work/ema" --device cpu >"$work/ema_e.log" 2>&1
check "evaluate uses the EMA, the mirror and the shifts by default" \
  grep -q "weights: EMA of the weights (decay 0.9) | views: image + mirror + one-pixel shifts$" "$work/ema_e.log"
check "... and gets train's last test loss ($train_loss)" grep -q "^loss $train_loss," "$work/ema_e.log"
"$BIN/evaluate" "$work/ema" --device cpu --weights model --no-tta-shift --tta-flip --no-tta-flip --json - \
  >"$work/ema_m.json" 2>&1
check "--weights model, the last of --tta-flip/--no-tta-flip: the last step's weights, the image alone" \
  json "$work/ema_m.json" "j['weights'] == 'model' and j['views'] == 'image' and abs(j['loss'] - $train_loss) > 1e-4"
"$BIN/evaluate" "$work/pf" --device cpu --weights ema >"$work/x0.log" 2>&1
check "--weights ema on a run without --ema exits 2" test $? -eq 2
check "... naming the file and the way out" grep -q "holds no EMA of the weights.*use --weights model" "$work/x0.log"
"$BIN/predict" "$work/ema" "$work/png/test" --device cpu -k 3 >"$work/pd.csv" 2>&1
"$BIN/predict" "$work/ema" "$work/png/test" --device cpu -k 3 --weights ema >"$work/pe.csv" 2>&1
"$BIN/predict" "$work/ema" "$work/png/test" --device cpu -k 3 --weights model >"$work/pm.csv" 2>&1
check "predict uses the EMA by default" cmp -s "$work/pd.csv" "$work/pe.csv"
check "... which --weights model leaves out" bash -c "! cmp -s '$work/pd.csv' '$work/pm.csv'"

# 4. Errors: one line naming what is wrong, the right exit code.
"$BIN/predict" "$work/pf" "$work/nowhere.png" >"$work/x1.log" 2>&1
check "predict on a missing file exits 2 naming it" bash -c "test $? -eq 2 && grep -q 'nowhere.png' '$work/x1.log'"
printf 'not a checkpoint' >"$work/bad.safetensors"
"$BIN/evaluate" "$work/bad.safetensors" >"$work/x2.log" 2>&1
check "evaluate on a damaged checkpoint exits 1 naming it" bash -c "test $? -eq 1 && grep -q 'bad.safetensors' '$work/x2.log'"
"$BIN/evaluate" "$work/pf" --bacth 3 >"$work/x3.log" 2>&1
check "an unknown flag gets a 'did you mean'" grep -q "unknown flag --bacth; did you mean --batch?" "$work/x3.log"

exit $fail
