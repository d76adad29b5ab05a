# Stage "bn_cudnn" of scripts/device_call.sh (issue 21): cuDNN's one-launch channels-last batch norm + ReLU
# (cudnnBatchNormalizationForwardTrainingEx / BackwardEx, persistent and spatial modes) against Liftoff's
# passes, device time in captured graphs, at the panel models' batch-norm shapes
# (tools/bench/bn_cudnn_bench.cpp). BN_CUDNN_RUNS: "dtype:act:resident" entries, resident = LIFTOFF_BN_RESIDENT
# for Liftoff's side (default "bf16:relu:auto bf16:relu:off bf16:relu6:auto f16:relu:auto"). Log:
# $OUT/bn_cudnn.log.
for run in ${BN_CUDNN_RUNS:-bf16:relu:auto bf16:relu:off bf16:relu6:auto f16:relu:auto}; do
  IFS=: read -r dtype act resident <<<"$run"
  echo "######## $dtype $act LIFTOFF_BN_RESIDENT=$resident" >>"$OUT/bn_cudnn.log"
  LIFTOFF_BN_RESIDENT=$resident timeout 120 /tmp/bin/bn_cudnn_bench --dtype "$dtype" --act "$act" \
    >>"$OUT/bn_cudnn.log" 2>&1
  note "bn_cudnn $dtype $act resident=$resident: rc=$? $(grep -E '^sums' "$OUT/bn_cudnn.log" | tail -1) | refused rows: $(grep -c refused "$OUT/bn_cudnn.log")"
done
