# Stage "folder_train" of scripts/device_call.sh: issue 22's end-to-end check alone (without the decode
# stage's loader benchmarks): ResNet-50 bf16 batch 256 trained from a JPEG folder made from the carried
# photographs with default loader flags, next to the same model on synthetic on-GPU data (model_panel).
# FOLDER_FILES: training images per photograph (class) (default 6000: 2 photographs -> ~47 steps an epoch, so
# the run crosses epochs). FOLDER_STEPS: training steps (default 120, the first 10 not timed). FOLDER_DECODES:
# --decode values to run (default "auto", the default flags, i.e. the CPU + GPU hybrid; e.g. "auto cpu gpu").
# FOLDER_MODELS: models (default resnet50; e.g. "resnet50 resnet18": a faster model needs more decoding).
# FOLDER_TIMEOUT: seconds a training run may take (default 150). FOLDER_TRACE=1: a Chrome trace of each run in $OUT.
# FOLDER_LOG=1: each run's metrics every 5 steps (the hybrid's CPU share, the workers' busy share) in $OUT; a
# diagnostic run only: each log line reads the loss, a device synchronisation every 5 steps.
# For --decode auto it notes the hybrid's CPU share (mean and final) and the device-side input wait.
# The decode stage sources this after making /tmp/jf; this stage uses its own folder of FOLDER_FILES.
files=${FOLDER_FILES:-6000}
jf=/tmp/jf_$files
[ -d $jf/train ] || /tmp/bin/make_jpeg_folder --out $jf --photos .devrun/photos/*.jpg --train "$files" \
  --test 64 --min-side 256 --max-side 500 >>"$OUT/folder_train.log" 2>&1
for model in ${FOLDER_MODELS:-resnet50}; do
  run_index=0
  for decode in ${FOLDER_DECODES:-auto}; do
    run_index=$((run_index + 1))
    # A run past FOLDER_TIMEOUT gets SIGUSR1 first (train prints every thread's stack), then TERM.
    timeout -s USR1 -k 10 ${FOLDER_TIMEOUT:-150} /tmp/bin/train --device cuda --model "$model" --image-size 224 --data folder --data-dir $jf \
      --amp bf16 --batch 256 --max-steps ${FOLDER_STEPS:-120} --timing-warmup 10 --epochs 100 --no-eval \
      --decode "$decode" --report /tmp/folder_train.json \
      ${FOLDER_TRACE:+--trace "$OUT/folder_trace_${model}_${decode}_$run_index.json"} \
      ${FOLDER_LOG:+--log "$OUT/folder_log_${model}_$decode.jsonl" --log-every 5} >/tmp/folder_train.log 2>&1
    note "train $model folder ($files/photo) --decode $decode: rc=$? $(steady /tmp/folder_train.log) | GPU busy $(grep -oE 'GPU busy [0-9]+%' /tmp/folder_train.log | tail -1)"
    note "  $(grep -m1 -oE 'decode (auto|gpu|cpu)[^;]*' /tmp/folder_train.log | cut -c1-200)"
    note "  $(grep -oE 'hybrid CPU share [^;]*' /tmp/folder_train.log | tail -1)"
    note "  $(grep -oE 'decode stream [0-9.]+ ms per batch' /tmp/folder_train.log | tail -1); device input wait $(python3 -c "import json;l=json.load(open('/tmp/folder_train.json'))['loader'];r=json.load(open('/tmp/folder_train.json'));print(l.get('device_wait_ms_per_batch'),'ms/batch; workers busy',l.get('worker_busy_pct_mean'),'%; share mean/final',l.get('hybrid_cpu_share_mean'),l.get('hybrid_cpu_share_final'),'; step ms mean/max',r['steps']['step_ms'].get('mean'),r['steps']['step_ms'].get('max'))" 2>&1 | tail -1)"
    note "  $(grep 'verdict' /tmp/folder_train.log | tail -1 | cut -c1-300)"
    { echo "#### $model --decode $decode"; cat /tmp/folder_train.log; } >>"$OUT/folder_train.log"
    cp /tmp/folder_train.json "$OUT/folder_train_${model}_$decode.json" 2>/dev/null
  done
  classes=$(ls $jf/train | wc -l)
  timeout 240 /tmp/bin/model_panel --model "$model" --image-size 224 --batch 256 --amp bf16 --classes "$classes" \
    --steps 30 --warmup 15 >/tmp/folder_panel.log 2>&1
  note "$model synthetic on-GPU (model_panel): rc=$? $(grep -oE 'images_per_s=[0-9.]+' /tmp/folder_panel.log)"
  cat /tmp/folder_panel.log >>"$OUT/folder_train.log"
done
