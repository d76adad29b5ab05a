# Stage "fp16capture" of scripts/device_call.sh: fp16 loss scaling + AdamW captured as a CUDA graph against
# the eager run, with the bisecting variants beside it (the scaler's skip flag in f32, bf16 autocast, fp16
# without overflow, fp16 with SGD, fp16 without dropout) and the resnet20 fp16/bf16 comparison. A failing
# comparison repeats its runs with the state read after every step and prints a "diagnosis" line naming the
# first step and the first piece of state that differ. First the op-level graph-safe RNG tests, among them
# RandomOpsInGraphs.StateIsNotABlockTheCapturedStepFreed (the half + dropout bug's cause, isolated).
log="$OUT/fp16capture.log"
timeout 120 /tmp/bin/test_ops_cuda --gtest_filter="RandomOpsInGraphs.*" >"$OUT/graph_random_ops.log" 2>&1
note "graph_random_ops rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/graph_random_ops.log" | tr '\n' ' ')"
grep -B1 -A6 -m 12 "Failure$" "$OUT/graph_random_ops.log" | head -40
timeout 420 /tmp/bin/test_models_cuda \
  --gtest_filter="CudaGraphRandom.*:CudaGraphTraining.MixedPrecisionWithLossScalingMatchesEager" >"$log" 2>&1
note "fp16capture rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \] CudaGraph' "$log" | sort -u
grep -A12 "diagnosis" "$log" | head -120
