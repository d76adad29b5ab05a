# Stage "lnorm" of scripts/device_call.sh: op_bandwidth's layer_norm fwd+bwd rows for each 16-bit layer norm
# backward variant (ops/layer_norm/backward_variant.h) in bf16, and f32 once (it takes the tile kernel
# whatever the variant). The other rows of each run are kept in the logs (a variant changes only these two).
lnorm_rows() {  # the two fwd+bwd rows of a log as "1024=73% 4096=72%" (the "of copy" column)
  awk '/^layer_norm fwd\+bwd/ {w = $3; gsub(/[()]/, "", w); printf "%s=%s(%s GB/s) ", w, $NF, $(NF-1)}' "$1"
}
for variant in tile packed two_rows wide automatic; do
  log="$OUT/lnorm_bf16_$variant.log"
  timeout 120 /tmp/bin/op_bandwidth --dtype bf16 --layer-norm-variant $variant >"$log" 2>&1
  note "lnorm bf16 $variant: rc=$? $(lnorm_rows "$log")"
done
timeout 120 /tmp/bin/op_bandwidth --dtype f32 >"$OUT/lnorm_f32.log" 2>&1
note "lnorm f32 (tile): rc=$? $(lnorm_rows "$OUT/lnorm_f32.log")"
