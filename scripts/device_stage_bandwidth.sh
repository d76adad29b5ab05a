# Stage "bandwidth" of scripts/device_call.sh: op_bandwidth in f32 and bf16 (kernels against the copy bandwidth).
for dt in f32 bf16; do
  timeout 120 /tmp/bin/op_bandwidth --dtype $dt >"$OUT/bandwidth_$dt.log" 2>&1
  note "bandwidth $dt: $(awk 'NR>1 {n = substr($0, 1, 28); gsub(/ /, "", n); printf "%s=%s ", n, $NF}' "$OUT/bandwidth_$dt.log" | head -c 1600)"
done
