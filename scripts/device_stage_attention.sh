# Stage "attention" of scripts/device_call.sh: attention_bench (Liftoff: the automatic choice of fused path,
# then the plain path with LIFTOFF_ATTENTION_FUSED=0) against tools/reference/attention_bench.py (PyTorch's
# scaled_dot_product_attention and bmm) on the same GPU, same shapes and dtype (ATTN_DTYPE, default bf16).
# One note per row: forward and forward+backward ms of each, the path Liftoff took (ours, cudnn), and
# PyTorch / Liftoff (> 1: Liftoff faster). ATTN_PLAIN=0 skips the plain-path run.
dt=${ATTN_DTYPE:-bf16}
timeout 300 /tmp/bin/attention_bench --dtype "$dt" >"$OUT/attention_liftoff.log" 2>&1
[ "${ATTN_PLAIN:-1}" = 0 ] || LIFTOFF_ATTENTION_FUSED=0 timeout 300 /tmp/bin/attention_bench --dtype "$dt" --only sdpa \
  >"$OUT/attention_plain.log" 2>&1
timeout 300 python3 tools/reference/attention_bench.py --dtype "$dt" >"$OUT/attention_torch.log" 2>&1
for name in $(awk 'NR>1 && NF>=3 && $1 ~ /^(sdpa|bmm)_/ {print $1}' "$OUT/attention_liftoff.log"); do
  lo=$(awk -v n="$name" '$1==n {print $2, $3}' "$OUT/attention_liftoff.log")
  path=$(awk -v n="$name" '$1==n {print $4}' "$OUT/attention_liftoff.log")
  pl=$(awk -v n="$name" '$1==n {print $2, $3}' "$OUT/attention_plain.log")
  pt=$(awk -v n="$name" '$1==n {print $2, $3}' "$OUT/attention_torch.log")
  ratio=$(awk -v a="$lo" -v b="$pt" 'BEGIN {split(a, l, " "); split(b, t, " ");
    if (l[1] > 0 && l[2] > 0 && t[1] > 0) printf "fwd %.2f fwd+bwd %.2f", t[1] / l[1], t[2] / l[2]; else print "n/a"}')
  note "attention $dt $name: liftoff ${lo:-failed} (${path:--}) | plain ${pl:--} | torch ${pt:-failed} ms | torch/liftoff $ratio"
done
[ -s "$OUT/attention_liftoff.log" ] || note "attention: attention_bench printed nothing"
grep -q "did not build" "$OUT/attention_liftoff.log" && note "attention: $(grep -A3 'did not build' "$OUT/attention_liftoff.log" | head -4 | tr '\n' ' ')"
grep -qi error "$OUT/attention_torch.log" && note "attention torch: $(grep -i error "$OUT/attention_torch.log" | tail -1)"
true
