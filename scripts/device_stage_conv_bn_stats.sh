# Stage "conv_bn_stats" of scripts/device_call.sh (issue 21): a convolution with its output's per-channel sum
# and sum of squares in one cuDNN graph (GenStats, or reductions) against conv2d + batch norm's statistics pass,
# at the panel models' shapes (tools/bench/conv_bn_stats_bench.cpp). CONV_BN_DTYPE: bf16 (default), f16, f32.
# Log: $OUT/conv_bn_stats.log.
timeout 240 /tmp/bin/conv_bn_stats_bench --dtype "${CONV_BN_DTYPE:-bf16}" >>"$OUT/conv_bn_stats.log" 2>&1
note "conv_bn_stats ${CONV_BN_DTYPE:-bf16}: rc=$? rows with a fused engine: $(grep -cE '(genstats|reduce) +[0-9]+ ' "$OUT/conv_bn_stats.log")"
