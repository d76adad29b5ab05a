# Stage "wcast" of scripts/device_call.sh: autocast's half weight copies refreshed in one batched launch per
# step (LIFTOFF_WEIGHT_CAST=batched, the default) against one cast kernel per weight (each), model_panel at
# 32 px, batch 128, bf16, captured (graphs auto) and eager (graphs off), alternating rounds in one call.
for m in ${WCAST_MODELS:-mobilenet_v2 resnet18}; do
  for graphs in auto off; do
    for round in 1 2; do
      for mode in each batched; do
        log="$OUT/wcast_${m}_${graphs}.log"
        echo "#### $mode round $round" >>"$log"
        LIFTOFF_WEIGHT_CAST=$mode timeout 240 /tmp/bin/model_panel --model $m --image-size 32 --batch 128 \
          --amp bf16 --cuda-graphs $graphs --steps ${WCAST_STEPS:-60} --warmup 20 >>"$log" 2>&1
        res=$(grep RESULT "$log" | tail -1)
        note "wcast $m graphs=$graphs $mode r$round: $(grep -oE 'images_per_s=[0-9.]+' <<<"$res") $(grep -oE 'ms_per_step=[0-9.]+' <<<"$res") $(grep -oE 'graphs=[a-z]+' <<<"$res")"
      done
    done
  done
done
