# Stage "depthwise" of scripts/device_call.sh: own channels-last depthwise conv2d kernels against cuDNN
# (LIFTOFF_DEPTHWISE=auto vs cudnn, same process) at the zoo MobileNetV2's 32 px shapes, batch 128, bf16 and
# f32: forward, input gradient, weight gradient and forward + both, per shape and summed over the model's 17.
for dt in bf16 f32; do
  timeout 300 /tmp/bin/depthwise_bench --dtype $dt >"$OUT/depthwise_$dt.log" 2>&1
  note "depthwise $dt rc=$? model(17) per pass (own-ms cudnn-ms speedup): $(awk '$1 == "model(17)" {printf "%s %s %s %s; ", $2, $3, $4, $5}' "$OUT/depthwise_$dt.log")"
  for pass in fwd bwd-data bwd-weight; do
    note "depthwise $dt $pass (shape own-ms cudnn-ms): $(awk -v p=$pass '$2 == p && $1 != "model(17)" {printf "%s %s %s; ", $1, $3, $4}' "$OUT/depthwise_$dt.log" | head -c 1200)"
  done
done
