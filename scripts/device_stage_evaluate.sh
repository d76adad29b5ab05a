# Stage "evaluate" of scripts/device_call.sh: the evaluate and predict tools on CUDA (issue 26 item 6). A short
# CUDA run writes a checkpoint; evaluate on cuda and on cpu must agree with train's own last evaluation (same
# weights, same test set); predict on cuda and cpu must rank a PNG folder the same way; --init-from a PyTorch
# state_dict and --resume with more epochs run on CUDA.
ev="$OUT/evaluate"
mkdir -p "$ev"
timeout 200 /tmp/bin/train --device cuda --model strided_cnn --data-dir $DATA --batch 128 --epochs 1 --max-steps 100 \
  --checkpoint-dir "$ev/ckpt" --no-profile >"$ev/train.log" 2>&1
note "evaluate: train rc=$?: $(grep -E 'test loss' "$ev/train.log" | tail -1 | cut -c1-160)"
for d in cuda cpu; do
  timeout 120 /tmp/bin/evaluate "$ev/ckpt" --device $d --json "$ev/eval_$d.json" >"$ev/eval_$d.log" 2>&1
  note "evaluate --device $d rc=$?: $(grep -E '^loss' "$ev/eval_$d.log" | cut -c1-120)"
done
timeout 120 /tmp/bin/export_images --data-dir $DATA --split test --limit 64 --out "$ev/png" >/dev/null 2>&1
for d in cuda cpu; do
  timeout 120 /tmp/bin/predict "$ev/ckpt" "$ev/png" --device $d -k 3 >"$ev/predict_$d.csv" 2>"$ev/predict_$d.err"
  note "predict --device $d rc=$? rows=$(wc -l <"$ev/predict_$d.csv")"
done
# Probabilities differ in the last digits between devices; the classes ranked must not.
note "predict cuda vs cpu: $(diff <(cut -d, -f1-4 "$ev/predict_cuda.csv") <(cut -d, -f1-4 "$ev/predict_cpu.csv") \
  >/dev/null && echo same rankings || echo RANKINGS DIFFER)"
timeout 200 /tmp/bin/train --resume "$ev/ckpt" --max-steps 150 >"$ev/resume.log" 2>&1
note "resume --max-steps 150 on cuda rc=$?: $(grep -E '^done:' "$ev/resume.log" | cut -c1-100)"
if [ -f tests/models/train/data/strided_cnn_torch.safetensors ]; then
  timeout 200 /tmp/bin/train --device cuda --model strided_cnn --data-dir $DATA --epochs 1 --max-steps 50 --no-profile \
    --init-from tests/models/train/data/strided_cnn_torch.safetensors >"$ev/init.log" 2>&1
  note "init-from a PyTorch state_dict on cuda rc=$?: $(grep -E '^done:' "$ev/init.log" | cut -c1-100)"
fi
