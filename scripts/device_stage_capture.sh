# Stage "capture" of scripts/device_call.sh: graph-safe dropout and capturable AdamW (issues 20/21). The GPU
# tests of the change, then mobilenet_v2 (classifier dropout) and vit_tiny (AdamW) trained with CUDA graphs
# auto and off: the report's "CUDA graphs:" line must say captured, and the images/s show what capture gains.
for t in "test_ops_cuda:RandomOpsInGraphs.*:OptimizerStepCuda.*:DropoutCuda.*:AttentionCuda.*" \
         "test_models_cuda:CudaGraphRandom.*:CudaGraphTraining.*"; do
  bin=${t%%:*}
  log="$OUT/capture_$bin.log"
  timeout 420 /tmp/bin/$bin --gtest_filter="${t#*:}" --gtest_brief=1 >"$log" 2>&1
  note "capture $bin rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr '\n' ' ')"
  grep -B1 -A6 -m 12 "Failure$" "$log" | head -60
done
for cfg in "mobilenet_v2:--optimizer sgd --lr 0.2 --wd 5e-4" "vit_tiny:--optimizer adamw --lr 1e-3 --wd 0.05"; do
  m=${cfg%%:*}
  for graphs in auto off; do
    log="$OUT/capture_${m}_$graphs.log"
    # shellcheck disable=SC2086
    timeout 300 /tmp/bin/train --device cuda --model $m --data-dir $DATA --amp bf16 --batch 256 --epochs 2 \
      --max-steps ${CAPTURE_STEPS:-300} --no-eval --cuda-graphs $graphs ${cfg#*:} >"$log" 2>&1
    note "capture $m graphs=$graphs rc=$?: $(steady "$log") | $(grep -iE 'CUDA graphs:' "$log" | tail -1 | cut -c1-160)"
  done
done
