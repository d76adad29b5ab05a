# Stage "verdicts" of scripts/device_call.sh (issue 23): plants each verdict case with the built `train` and
# notes its verdict line, plus the one-throughput and tail-batch checks. Each run is bounded (timeout) and
# takes about 10-20 s. Logs: $OUT/verdicts.log (every run, in order).
#   scripts/device_call.sh verdicts
LOG="$OUT/verdicts.log"
V=(--device cuda --no-eval --epochs 1000)
# A verdict line and its advice, from the last run in the log.
verdict_of() { echo "$(grep -E '^  verdict:' "$LOG" | tail -1 | cut -c1-260) | $(grep -E '^  try:' "$LOG" | tail -1)"; }
plant() {  # plant <label> <train flags...>
  local label=$1
  shift
  echo "######## $label: train $*" >>"$LOG"
  timeout -s KILL 90 /tmp/bin/train "${V[@]}" "$@" >>"$LOG" 2>&1
  note "verdict $label: rc=$? $(verdict_of)"
}

# JPEG folders: photographs of varied sizes (.devrun/photos, as the decode stage) or, without them, synthetic
# 224 px JPEGs; a same-size folder for --decode off (the workers decode to one size).
if ls .devrun/photos/*.jpg >/dev/null 2>&1; then
  /tmp/bin/make_jpeg_folder --out /tmp/vjf --photos .devrun/photos/*.jpg --train 3000 --test 64 --min-side 256 \
    --max-side 500 >>"$LOG" 2>&1
else
  /tmp/bin/export_images --data synthetic --format jpg --image-size 320 --count 3000 --out /tmp/vjf/train >>"$LOG" 2>&1
  /tmp/bin/export_images --data synthetic --format jpg --image-size 320 --count 200 --out /tmp/vjf/test >>"$LOG" 2>&1
fi
/tmp/bin/export_images --data synthetic --format jpg --image-size 224 --count 3000 --out /tmp/vj224/train >>"$LOG" 2>&1
/tmp/bin/export_images --data synthetic --format jpg --image-size 224 --count 200 --out /tmp/vj224/test >>"$LOG" 2>&1

# input-bound: one worker decoding JPEGs on the CPU -> more workers (the cores allow them; else --decode auto).
plant "input-bound (1 worker, CPU decode; expect --workers 2)" --data folder --data-dir /tmp/vjf --decode cpu \
  --workers 1 --model strided_cnn --batch 64 --amp bf16 --max-steps 40 --timing-warmup 5
# loader-bound: 8 workers but a ring of 2 batches: the workers idle while the step waits -> the ring named.
plant "loader-bound (8 workers, ring of 2; expect --prefetch 16)" --data folder --data-dir /tmp/vj224 \
  --decode off --workers 8 --prefetch 2 --model strided_cnn --batch 128 --amp bf16 --max-steps 60 --timing-warmup 5
# copy-bound: pageable f32 copies of 224 px images, a light model, enough workers -> --pin-memory.
plant "copy-bound (pageable, 224 px f32, light model; expect --pin-memory)" --data folder --data-dir /tmp/vj224 \
  --decode off --workers 14 --no-pin-memory --augment cpu --model strided_cnn --batch 128 --max-steps 60 \
  --timing-warmup 8
# host/launch-bound: eager tiny batches; 2 steps are too short to judge, 500 (the issue's 0.7 s run, once
# judged compute-bound) and 4000 are host-bound.
for steps in 2 500 4000; do
  plant "eager batch 8, $steps steps (expect $([ $steps = 2 ] && echo 'too short' || echo host/launch-bound))" \
    --data-dir "$DATA" --model simple_cnn --batch 8 --cuda-graphs off --max-steps $steps --timing-warmup 20
done
plant "graphs batch 16, 2000 steps (expect host/launch-bound, tiny kernels)" --data-dir "$DATA" --model simple_cnn \
  --batch 16 --max-steps 2000 --timing-warmup 50
# compute-bound: a large model at a large batch.
plant "compute-bound (resnet18 bf16 batch 512; expect compute-bound)" --data-dir "$DATA" --model resnet18 \
  --amp bf16 --batch 512 --max-steps 120 --timing-warmup 20
plant "compute-bound (resnet56 batch 1024 graphs)" --data-dir "$DATA" --model resnet56 --batch 1024 --max-steps 40 \
  --timing-warmup 5

# One throughput figure: the issue's 50-step run at batch 1024 (was 426,046 vs 186,255). The table, the done
# line and the JSON must agree, and the 50-step figure should be near the 300-step one.
for steps in 50 300; do
  echo "######## throughput, $steps steps" >>"$LOG"
  timeout -s KILL 90 /tmp/bin/train "${V[@]}" --data-dir "$DATA" --batch 1024 --amp bf16 --max-steps $steps \
    --report /tmp/v_tp_$steps.json >>"$LOG" 2>&1
  rc=$?
  json=$(python3 -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))['steps']['images_per_s'])" \
    /tmp/v_tp_$steps.json 2>/dev/null)
  note "throughput $steps steps: rc=$rc table [$(grep -oE 'throughput [0-9.]+ images/s' "$LOG" | tail -1)] done \
[$(grep -oE 'steady state [0-9.]+ images/s' "$LOG" | tail -1)] json [$json]"
done

# Epoch ends: two epochs at batch 1024 keep a 608-image tail with --no-drop-last; its shape is prepared in the
# warm-up, so no measured step should take the 332-664 ms of a cuDNN search (the step line's max).
for drop in --drop-last --no-drop-last; do
  echo "######## tail, $drop" >>"$LOG"
  timeout -s KILL 90 /tmp/bin/train --device cuda --no-eval --epochs 2 --data-dir "$DATA" --batch 1024 --amp bf16 \
    $drop >>"$LOG" 2>&1
  note "tail $drop: rc=$? $(grep -E '^  step ' "$LOG" | tail -1 | tr -s ' ') | $(grep -oE 'steady state [0-9.]+ images/s' "$LOG" | tail -1)"
done
