# Stage "ab_knob" of scripts/device_call.sh: one setting's values A/B on model_panel, alternating in rounds
# in one call (these machines are noisy). AB_KNOB: the variable (default LIFTOFF_BN_FUSED_BACKWARD);
# AB_VALUES: its values (default "0 1"); AB_MODELS: "model:size:batch:amp" entries; AB_ROUNDS (default 2).
knob=${AB_KNOB:-LIFTOFF_BN_FUSED_BACKWARD}
for entry in ${AB_MODELS:-resnet18:32:128:bf16 mobilenet_v2:32:128:bf16}; do
  IFS=: read -r m size batch amp <<<"$entry"
  classes=10; [ "$size" -ge 64 ] && classes=1000
  for round in $(seq 1 "${AB_ROUNDS:-2}"); do
    for value in ${AB_VALUES:-0 1}; do
      log="$OUT/ab_knob.log"
      echo "#### $knob=$value $entry round $round" >>"$log"
      env "$knob=$value" timeout 240 /tmp/bin/model_panel --model "$m" --image-size "$size" --batch "$batch" \
        --amp "$amp" --classes "$classes" --steps ${AB_STEPS:-60} --warmup 20 >/tmp/ab_knob.log 2>&1
      cat /tmp/ab_knob.log >>"$log"
      res=$(grep RESULT /tmp/ab_knob.log | tail -1)
      note "ab $knob=$value $entry r$round: $(grep -oE 'images_per_s=[0-9.]+' <<<"$res") $(grep -oE 'ms_per_step=[0-9.]+' <<<"$res") $(grep -oE 'graphs=[a-z]+' <<<"$res")"
    done
  done
done
