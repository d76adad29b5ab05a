# Stage "profile" of scripts/device_call.sh: per-kernel device time of a few eager steps, Liftoff's model_panel
# against the PyTorch twin (tools/reference/kernel_profile.py), both under ncu with one metric (kernel duration).
# PROFILE: "model:size:batch:amp:steps" entries. PROFILE_CACHE=none keeps the caches between kernels (as in a run;
# ncu flushes them by default); PROFILE_RAW=1 returns the CSVs (every launch with its grid) as $OUT/profile_raw.tgz.
for entry in ${PROFILE:-resnet18:32:512:bf16:2 resnet50:224:64:bf16:1 strided_cnn:512:128:bf16:2}; do
  IFS=: read -r m size batch amp steps <<<"$entry"
  classes=10; [ "$size" -ge 64 ] && classes=1000
  args="--model $m --image-size $size --batch $batch --amp $amp --classes $classes"
  ncu_args="--profile-from-start off --clock-control none --cache-control ${PROFILE_CACHE:-all} --metrics gpu__time_duration.sum --csv --print-units base"
  tag="$m-$size-$batch-$amp"
  timeout 300 ncu $ncu_args /tmp/bin/model_panel $args --cuda-graphs off --warmup 5 --steps 5 \
    --profile-steps "$steps" >"/tmp/prof-lo-$tag.csv" 2>>"$OUT/profile.err"
  timeout 300 ncu $ncu_args python3 tools/reference/kernel_profile.py $args --warmup 5 --profile-steps "$steps" \
    >"/tmp/prof-pt-$tag.csv" 2>>"$OUT/profile.err"
  for who in lo pt; do
    { echo "#### $who $tag"; python3 scripts/ncu_summary.py "/tmp/prof-$who-$tag.csv" "$steps" 40; } >>"$OUT/profile.log"
  done
  note "profile $tag: liftoff $(python3 scripts/ncu_summary.py /tmp/prof-lo-$tag.csv $steps 0 | head -1) | torch $(python3 scripts/ncu_summary.py /tmp/prof-pt-$tag.csv $steps 0 | head -1)"
done
[ "${PROFILE_RAW:-0}" = 1 ] && tar -C /tmp -czf "$OUT/profile_raw.tgz" $(cd /tmp && ls prof-*.csv)
