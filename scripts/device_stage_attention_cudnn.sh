# Stage "attention_cudnn" of scripts/device_call.sh: cuDNN's fused attention (attention_bench --kernels cudnn,
# with LIFTOFF_CUDNN_LOG=1: each plan's engine and workspace, or why it did not build) against Liftoff's own
# fused kernels (--kernels flash) and PyTorch (tools/reference/attention_bench.py) on every sdpa row, same
# GPU, shapes and dtype (ATTN_DTYPE, default bf16), to set the length rule of path.h's automatic choice.
# One note per row: forward and forward+backward ms of each, and ours / cuDNN (> 1: cuDNN faster).
dt=${ATTN_DTYPE:-bf16}
LIFTOFF_CUDNN_LOG=1 timeout 300 /tmp/bin/attention_bench --dtype "$dt" --only sdpa --kernels cudnn \
  >"$OUT/attention_cudnn.log" 2>&1
timeout 300 /tmp/bin/attention_bench --dtype "$dt" --only sdpa --kernels flash >"$OUT/attention_ours.log" 2>&1
[ -s "$OUT/attention_torch.log" ] ||
  timeout 300 python3 tools/reference/attention_bench.py --dtype "$dt" --only sdpa >"$OUT/attention_torch.log" 2>&1
for name in $(awk '$1 ~ /^sdpa_/ && NF>=3 {print $1}' "$OUT/attention_cudnn.log" "$OUT/attention_ours.log" | sort -u); do
  cu=$(awk -v n="$name" '$1==n {print $2, $3}' "$OUT/attention_cudnn.log")
  cpath=$(awk -v n="$name" '$1==n {print $4}' "$OUT/attention_cudnn.log")
  ours=$(awk -v n="$name" '$1==n {print $2, $3}' "$OUT/attention_ours.log")
  pt=$(awk -v n="$name" '$1==n {print $2, $3}' "$OUT/attention_torch.log")
  ratio=$(awk -v a="$cu" -v b="$ours" 'BEGIN {split(a, c, " "); split(b, o, " ");
    if (c[1] > 0 && c[2] > 0 && o[1] > 0) printf "fwd %.2f fwd+bwd %.2f", o[1] / c[1], o[2] / c[2]; else print "n/a"}')
  note "attention_cudnn $dt $name: cudnn ${cu:-failed} (ran: ${cpath:--}) | ours ${ours:-failed} | torch ${pt:--} ms | ours/cudnn $ratio"
done
[ -s "$OUT/attention_cudnn.log" ] || note "attention_cudnn: attention_bench printed nothing"
grep -q "did not build" "$OUT/attention_cudnn.log" &&
  note "attention_cudnn failures: $(grep -A4 'did not build' "$OUT/attention_cudnn.log" | head -5 | cut -c1-400 | tr '\n' ' ')"
true
