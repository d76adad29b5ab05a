# Stage "depthwise" of scripts/device_call.sh: own channels-last depthwise conv2d kernels against cuDNN
# (LIFTOFF_DEPTHWISE=auto vs cudnn, same process) at MobileNetV2's 32 px shapes, batch 128, bf16 and f32.
for dt in bf16 f32; do
  timeout 240 /tmp/bin/depthwise_bench --dtype $dt >"$OUT/depthwise_$dt.log" 2>&1
  note "depthwise $dt (layer pass own-ms cudnn-ms speedup): $(awk 'NR>1 {printf "%s%s%s%s%s %s %s %s %s; ", $1, $2, $3, $4, $5, $6, $7, $8, $9}' "$OUT/depthwise_$dt.log" | head -c 1600)"
done
