# Stage "cold_start" of scripts/device_call.sh: a first run's cuDNN algorithm searches, a baseline build
# (/tmp/old/train, from scripts/pack_device_run.sh's second argument) against this one, alternating in rounds;
# each run starts with an empty algorithm store. Per run: the searches' count and time (the report's start-up
# line), the first epoch's time, the steady images/s (a search that picks worse algorithms shows there) and the
# final accuracy. COLD_MODELS: zoo names (default "resnet9 resnet20 resnet18 mobilenet_v2"), COLD_ROUNDS
# (default 2), COLD_EPOCHS (default 2). COLD_LOG=1: LIFTOFF_CUDNN_LOG=1 on the first round (each search's split).
for m in ${COLD_MODELS:-resnet9 resnet20 resnet18 mobilenet_v2}; do
  for round in $(seq 1 "${COLD_ROUNDS:-2}"); do
    for b in old bin; do
      [ -x "/tmp/$b/train" ] || continue
      log="$OUT/cold_start.log"
      echo "#### $b $m round $round" >>"$log"
      cudnn_log=0
      [ "${COLD_LOG:-0}" = 1 ] && [ "$round" = 1 ] && cudnn_log=1
      LIFTOFF_CONV_CACHE=$(mktemp -d) LIFTOFF_CUDNN_LOG=$cudnn_log timeout 240 "/tmp/$b/train" --device cuda \
        --data-dir "$DATA" --model "$m" --amp bf16 --batch 512 --lr 0.1 --epochs "${COLD_EPOCHS:-2}" \
        --eval-every "${COLD_EPOCHS:-2}" --seed "$round" >/tmp/cold_start.log 2>&1
      rc=$?
      cat /tmp/cold_start.log >>"$log"
      note "cold $b $m r$round rc=$rc: $(grep -oE '[0-9]+ cuDNN algorithm searches took [0-9.]+ s' /tmp/cold_start.log) | epoch 1 $(grep -E '^epoch 1/[0-9]+:' /tmp/cold_start.log | grep -oE '\([0-9.]+ s' | tr -d '(') | $(steady /tmp/cold_start.log) | $(grep -oE 'final test accuracy [0-9.]+%' /tmp/cold_start.log)"
    done
  done
done
