# Stage "conv512": the cuDNN choices for the strided CNN at 512 px (issue 21: its first layer's weight gradient
# ran wgrad_alg0_engine_NHWC for half of the step), logged (LIFTOFF_CUDNN_LOG=1), with the default search and
# with a larger workspace cap, and the images/s of each.
for ws in default 2048; do
  envs="LIFTOFF_CUDNN_LOG=1"; [ "$ws" = default ] || envs="$envs LIFTOFF_CUDNN_WORKSPACE_MB=$ws"
  env $envs timeout 200 /tmp/bin/model_panel --model strided_cnn --image-size 512 --batch 128 --amp bf16 \
    --classes 1000 --steps 20 --warmup 10 >"$OUT/conv512_$ws.log" 2>&1
  note "conv512 workspace $ws: $(grep -oE 'images_per_s=[0-9.]+' "$OUT/conv512_$ws.log")"
  grep -E "^liftoff cudnn: backward-filter" "$OUT/conv512_$ws.log" | head -4 | cut -c1-220
done
