# Stage "attention_kernels" of scripts/device_call.sh: the two families of fused attention kernels (flash.h:
# simple = 64-row tiles, synchronous loads; pipelined = 128-row tiles, cp.async, ldmatrix) on every sdpa row
# of attention_bench, one note per row with both, to set the length rule of flash_pipelined_applies().
dt=${ATTN_DTYPE:-bf16}
for family in simple pipelined; do
  timeout 240 /tmp/bin/attention_bench --dtype "$dt" --only sdpa --kernels $family \
    >"$OUT/attention_$family.log" 2>&1
done
for name in $(awk 'NR>1 && NF>=3 && $1 ~ /^sdpa_/ {print $1}' "$OUT/attention_simple.log" "$OUT/attention_pipelined.log" | sort -u); do
  si=$(awk -v n="$name" '$1==n {print $2, $3}' "$OUT/attention_simple.log")
  pi=$(awk -v n="$name" '$1==n {print $2, $3}' "$OUT/attention_pipelined.log")
  note "attention kernels $dt $name: simple ${si:-failed} | pipelined ${pi:-failed} ms (fwd, fwd+bwd)"
done
[ -s "$OUT/attention_pipelined.log" ] || note "attention_kernels: attention_bench printed nothing"
true
