# Stage "cublas_ws" of scripts/device_call.sh: LIFTOFF_CUBLAS_WORKSPACE_MB A/B (0: cuBLAS's own pool) on the
# bmm rows of attention_bench (bf16, alternating rounds) and on model_panel rows (WS_PANEL "model:size:batch:amp"),
# PyTorch's bmm in the same call for the ratio.
timeout 120 python3 tools/reference/attention_bench.py --dtype bf16 --only bmm >"$OUT/ws_torch.log" 2>&1
for round in 1 2; do
  for mb in 0 ${WS_SIZES:-32 128}; do
    LIFTOFF_CUBLAS_WORKSPACE_MB=$mb timeout 120 /tmp/bin/attention_bench --dtype bf16 --only bmm \
      >"/tmp/ws_$mb.log" 2>&1
    { echo "#### ws $mb round $round"; cat "/tmp/ws_$mb.log"; } >>"$OUT/ws_bmm.log"
    note "cublas ws $mb MiB r$round bmm fwd/fwd+bwd: $(awk '$1 ~ /^bmm_/ {printf "%s %s/%s  ", substr($1, 5), $2, $3}' "/tmp/ws_$mb.log")"
  done
done
note "torch bmm fwd/fwd+bwd: $(awk '$1 ~ /^bmm_/ {printf "%s %s/%s  ", substr($1, 5), $2, $3}' "$OUT/ws_torch.log")"
for entry in ${WS_PANEL:-resnet18:32:128:bf16 mobilenet_v2:32:128:bf16}; do
  IFS=: read -r m size batch amp <<<"$entry"
  classes=10; [ "$size" -ge 64 ] && classes=1000
  for mb in 0 32 0 32; do
    r=$(LIFTOFF_CUBLAS_WORKSPACE_MB=$mb timeout 200 /tmp/bin/model_panel --model $m --image-size $size --batch $batch \
      --amp $amp --classes $classes --steps 30 --warmup 15 2>/dev/null | grep -oE 'images_per_s=[0-9.]+')
    note "cublas ws $mb MiB panel $entry: $r"
  done
done
true
