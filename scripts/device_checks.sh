#!/usr/bin/env bash
# Runs on the lent GPU machine from the repo root (see scripts/pack_device_run.sh): unpacks the executables,
# then runs the named stages, writing logs to $OUT and a short table at the end.
#   scripts/device_checks.sh tests doctor accuracy bench
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/bin
tar -C /tmp/bin -xJf .devrun/bin.tar.xz
source .devrun/shared/device-env.sh
export PYTHONUNBUFFERED=1
DATA=.devrun/data
summary=()
note() { summary+=("$1"); echo "== $1"; }

# `train --gpus 2` with rank 1 killed (-9) after 10 s: how long the launcher takes to end, and what it says.
ddp_kill_test() {
  ( timeout -s KILL 120 /tmp/bin/train --gpus 2 --model resnet20 --data-dir $DATA --batch 128 --epochs 100 --no-eval \
      >"$OUT/ddp_kill.log" 2>&1; echo "exit=$?" >>"$OUT/ddp_kill.log" ) &
  sleep 10
  local victim t0 t1
  victim=$(pgrep -f 'bin/train --model resnet20' | tail -1)
  t0=$(date +%s); kill -9 $victim; wait; t1=$(date +%s)
  note "ddp kill -9 of pid $victim: launcher ended $((t1 - t0)) s later: $(tail -2 "$OUT/ddp_kill.log" | tr '\n' ' ' | cut -c1-300)"
  sleep 1; note "ranks left running after the kill test: $(pgrep -f 'bin/train' | wc -l)"; pkill -9 -f 'bin/train' 2>/dev/null
}

for stage in "$@"; do
  case "$stage" in
    tests)
      # Every suite; one combined log (the device tool returns at most 8 files).
      for t in /tmp/bin/test_*; do
        name=$(basename "$t")
        case "$name" in test_distributed_mpi*) continue ;; esac  # ctest runs these under mpirun
        echo "######## $name" >>"$OUT/tests.log"
        "$t" --gtest_brief=1 >>"$OUT/tests.log" 2>&1
        rc=$?
        note "$name: rc=$rc $(tail -3 "$OUT/tests.log" | grep -E '(PASSED|FAILED|SKIPPED)' | tr '\n' ' ')"
      done
      grep -B2 -A6 -E "^\[  FAILED  \]|Failure$" "$OUT/tests.log" | head -80
      ;;
    gtests)
      # The named GPU suites (GTESTS), one combined log.
      for name in ${GTESTS:-test_ops_cuda test_models_cuda test_runtime_cuda test_distributed_cuda}; do
        echo "######## $name" >>"$OUT/gtests.log"
        timeout 300 /tmp/bin/$name --gtest_brief=1 >>"$OUT/gtests.log" 2>&1
        note "$name: rc=$? $(tail -4 "$OUT/gtests.log" | grep -E '(PASSED|FAILED|SKIPPED)' | tr '\n' ' ')"
      done
      grep -B2 -A8 -E "^\[  FAILED  \]|Failure$" "$OUT/gtests.log" | head -60
      ;;
    quicktests)
      for name in test_models test_runtime_cuda test_ops_cuda test_distributed_cuda; do
        /tmp/bin/$name --gtest_brief=1 >>"$OUT/tests.log" 2>&1
        note "$name: rc=$? $(tail -3 "$OUT/tests.log" | grep -E '(PASSED|FAILED)' | tr '\n' ' ')"
      done
      ;;
    sanitize)
      # The loader's GPU stress and parity tests under compute-sanitizer (memcheck, then racecheck).
      for tool in memcheck racecheck; do
        timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/test_data_cuda --gtest_brief=1 \
          >>"$OUT/sanitize.log" 2>&1
        note "compute-sanitizer $tool test_data_cuda: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitize.log" | tail -1)"
      done
      ;;
    doctor)
      /tmp/bin/doctor >"$OUT/doctor.log" 2>&1
      note "doctor: rc=$? $(grep verdict "$OUT/doctor.log")"
      cat "$OUT/doctor.log"
      ;;
    accuracy)
      /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --epochs ${EPOCHS:-15} --batch 256 \
        --lr 0.2 --label-smoothing 0.1 >"$OUT/accuracy.log" 2>&1
      note "accuracy: rc=$? $(tail -1 "$OUT/accuracy.log")"
      tail -4 "$OUT/accuracy.log"
      ;;
    bench)
      # Liftoff and PyTorch side by side: ResNet-20 at batch 256 and 16 x accum 4, fp32 / bf16 / fp16.
      for cfg in "256 1 off 200" "16 4 off 200" "256 1 bf16 200" "16 4 bf16 200"; do
        set -- $cfg
        tag="b$1x$2-$3"
        /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --batch $1 --accum $2 --amp $3 \
          --max-steps $4 --timing-warmup 20 --no-eval --epochs 100 >>"$OUT/bench.log" 2>&1
        lo=$(grep -o 'steady state [0-9.]* images/s' "$OUT/bench.log" | tail -1)
        cl=""; [ "$3" != off ] && cl="--channels-last"
        python3 tools/reference/train_reference.py --device cuda --data-dir $DATA --batch $1 --accum $2 --amp $3 \
          $cl --steps $(( $4 - 20 )) --warmup-steps 20 >>"$OUT/bench.log" 2>&1
        pt=$(grep RESULT "$OUT/bench.log" | tail -1)
        note "bench $tag: liftoff [$lo] pytorch [$pt]"
      done
      ;;
    loader)
      # Data stage hidden? Real data + GPU augmentation vs synthetic; then CPU augmentation and pageable memory.
      for cfg in "fashion-mnist auto pin" "synthetic auto pin" "fashion-mnist cpu pin" "fashion-mnist auto nopin" \
                 "fashion-mnist cpu nopin"; do
        set -- $cfg
        pin="--pin-memory"; [ "$3" = nopin ] && pin="--no-pin-memory"
        /tmp/bin/train --device cuda --data $1 --synthetic-size 60000 --data-dir $DATA --batch 256 --augment $2 $pin \
          --max-steps 230 --timing-warmup 30 --no-eval --epochs 100 >>"$OUT/loader.log" 2>&1
        note "loader $1 augment=$2 $3: $(grep -o 'steady state [0-9.]* images/s' "$OUT/loader.log" | tail -1) | $(grep 'verdict' "$OUT/loader.log" | tail -1 | cut -c1-150)"
      done
      ;;
    amp_accuracy)
      for amp in off bf16 fp16; do
        /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --epochs ${EPOCHS:-15} --batch 256 \
          --lr 0.2 --label-smoothing 0.1 --amp $amp --report "$OUT/acc_$amp.json" >>"$OUT/amp_accuracy.log" 2>&1
        note "accuracy amp=$amp: $(grep '^done' "$OUT/amp_accuracy.log" | tail -1 | grep -o 'final test accuracy .*') | $(grep -E 'memory|amp:' "$OUT/amp_accuracy.log" | tail -2 | tr '\n' ' ')"
      done
      ;;
    overhead)
      # Profiling on vs off, same recipe, interleaved twice (issue: utilization report, within 2%).
      for round in $(seq ${ROUNDS:-2}); do
        for prof in --profile --no-profile; do
          /tmp/bin/train --device cuda --data-dir $DATA --batch 256 $prof --max-steps 230 --timing-warmup 30 --no-eval \
            --epochs 100 >>"$OUT/overhead.log" 2>&1
          note "overhead b256 $prof: $(grep -o 'steady state [0-9.]* images/s' "$OUT/overhead.log" | tail -1)"
          /tmp/bin/train --device cuda --data-dir $DATA --batch 16 --accum 4 $prof --max-steps 150 --timing-warmup 20 \
            --no-eval --epochs 100 >>"$OUT/overhead.log" 2>&1
          note "overhead b16x4 $prof: $(grep -o 'steady state [0-9.]* images/s' "$OUT/overhead.log" | tail -1)"
        done
      done
      ;;
    ddp)
      pkill -9 -f 'bin/train' 2>/dev/null; sleep 1
      # 2 GPUs: correctness vs 1 GPU at the same global batch, and the socket transport through the
      # environment-variable launch (scaling, accumulation and the killed rank: ddp_perf).
      # Gate: a short 2-GPU run must finish before the long ones are tried (a hang costs 40 s, not the call).
      timeout -s KILL 40 /tmp/bin/train --gpus 2 --model resnet20 --data-dir $DATA --batch 128 --max-steps 30 \
        --no-eval --epochs 100 >>"$OUT/ddp.log" 2>&1
      rc=$?; note "ddp gate (30 steps on 2 GPUs): rc=$rc $(grep -c 'parameter checksum' "$OUT/ddp.log") checksum lines"
      if [ $rc -ne 0 ]; then pkill -9 -f 'bin/train'; tail -30 "$OUT/ddp.log"; continue; fi
      R="--model resnet20 --data-dir $DATA --lr 0.2 --label-smoothing 0.1 --epochs ${DDP_EPOCHS:-15}"
      timeout -s KILL 150 /tmp/bin/train --gpus 2 $R --batch 128 >>"$OUT/ddp.log" 2>&1
      note "ddp 2 GPUs x 128: $(grep -E '^done' "$OUT/ddp.log" | tail -1 | grep -o 'final test accuracy .*') | $(grep -c 'parameter checksum' "$OUT/ddp.log") checksum lines, $(grep 'parameter checksum' "$OUT/ddp.log" | awk '{print $5,$7}' | sort -u | wc -l) distinct"
      /tmp/bin/train --device cuda $R --batch 256 >>"$OUT/ddp.log" 2>&1
      note "ddp 1 GPU x 256: $(grep -E '^done' "$OUT/ddp.log" | tail -1 | grep -o 'final test accuracy .*')"
      rm -f /tmp/ncclid
      for r in 0 1; do
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LIFTOFF_NCCL_ID_FILE=/tmp/ncclid NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
          NCCL_DEBUG=INFO timeout -s KILL 60 /tmp/bin/train --model resnet20 --data-dir $DATA --batch 128 --max-steps 100 --no-eval \
          --epochs 100 >"$OUT/ddp_env_rank$r.log" 2>&1 &
      done
      wait
      note "ddp env launch, socket transport: $(grep -o 'NET/Socket' "$OUT/ddp_env_rank0.log" | head -1) $(grep -h 'parameter checksum' "$OUT"/ddp_env_rank*.log | awk '{print $5}' | sort -u | wc -l) distinct checksum(s); $(grep -o 'steady state [0-9.]* images/s' "$OUT/ddp_env_rank0.log"); $(grep -o 'CUDA graphs: [^;]*' "$OUT/ddp_env_rank0.log" | tail -1 | cut -c1-60)"
      ;;
    ddp_perf)
      # The scaling figures (CUDA graphs auto = the default, and off), then the killed-rank check.
      pkill -9 -f 'bin/train' 2>/dev/null; sleep 1
      for n in ${DDP_NS:-1 2}; do
        for g in ${DDP_GRAPHS:-auto off}; do
          timeout -s KILL 60 /tmp/bin/train --gpus $n --device cuda --model resnet20 --data-dir $DATA --batch 256 --amp bf16 \
            --cuda-graphs $g --max-steps ${DDP_STEPS:-300} --timing-warmup 30 --no-eval --epochs 100 >>"$OUT/ddp.log" 2>&1
          note "ddp scaling bf16 ${n} GPU(s) graphs $g: rc=$? liftoff [$(grep -o 'steady state [0-9.]* images/s' "$OUT/ddp.log" | tail -1)] [$(grep '^ddp:' "$OUT/ddp.log" | tail -1 | grep -o '([0-9]* buckets).*' | cut -c1-200)] [$(grep -o 'CUDA graphs: [^;]*' "$OUT/ddp.log" | tail -1 | cut -c1-80)]"
        done
        [ "${DDP_PT:-1}" = 0 ] && continue
        torchrun --standalone --nproc_per_node $n tools/reference/ddp_reference.py --model resnet20 --batch 256 \
          --amp bf16 --channels-last --bucket-mb 25 --steps 180 --warmup-steps 20 >>"$OUT/ddp.log" 2>&1
        note "ddp scaling bf16 ${n} GPU(s): pytorch [$(grep RESULT "$OUT/ddp.log" | tail -1)]"
      done
      timeout -s KILL 60 /tmp/bin/train --gpus 2 --model resnet20 --data-dir $DATA --batch 64 --accum 4 --max-steps 50 --no-eval \
        --epochs 100 >>"$OUT/ddp.log" 2>&1
      note "ddp accum 4 (graphs auto): $(grep '^ddp:' "$OUT/ddp.log" | tail -1 | cut -c1-160) | $(grep -h 'parameter checksum' "$OUT/ddp.log" | tail -2 | awk '{print $5}' | sort -u | wc -l) distinct checksum(s)"
      [ -n "${DDP_KILL:-1}" ] && ddp_kill_test
      ;;
    ab_env)
      # A/B of one environment setting (AB_ENV, e.g. LIFTOFF_CONV_ENGINES=legacy) against the default, alternating.
      IFS=';' read -ra cfgs <<<"${AB_CFGS:-16 4 off 300;256 1 off 200}"
      for round in $(seq ${ROUNDS:-3}); do
        for cfg in "${cfgs[@]}"; do
          set -- $cfg
          for envset in "LIFTOFF_AB_DEFAULT=1" "$AB_ENV"; do
            env $envset /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --batch $1 --accum $2 --amp $3 \
              --max-steps $4 --timing-warmup 20 --no-eval --epochs 100 >>"$OUT/ab.log" 2>&1
            note "ab_env b$1x$2-$3 [$envset]: rc=$? $(grep -o 'steady state [0-9.]* images/s' "$OUT/ab.log" | tail -1)"
          done
        done
      done
      ;;
    tta)
      # Time to 94% test accuracy, same recipe on both sides (15-epoch one-cycle, batch 256, SGD Nesterov,
      # wd 5e-4, label smoothing 0.1, crop + flip), data loading and evaluation in the wall time. TTA_AMP=bf16
      # runs both sides in bf16 (PyTorch: autocast + channels_last).
      R="--model resnet20 --data-dir $DATA --epochs 15 --batch 256 --lr 0.2 --label-smoothing 0.1 --target-accuracy 0.94 --amp ${TTA_AMP:-off}"
      /tmp/bin/train --device cuda $R >>"$OUT/tta.log" 2>&1
      note "time to 94% (amp ${TTA_AMP:-off}): liftoff $(grep -E '^time to|^target accuracy' "$OUT/tta.log" | tail -1)"
      python3 tools/reference/train_reference.py --device cuda --channels-last $R >>"$OUT/tta.log" 2>&1
      note "time to 94% (amp ${TTA_AMP:-off}): pytorch $(grep RESULT "$OUT/tta.log" | tail -1)"
      ;;
    memory_default)
      # Peak device memory at batch 256 per --amp mode, default settings (CUDA graphs auto), one call.
      for amp in off bf16 fp16; do
        /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --batch 256 --amp $amp --max-steps 230 \
          --timing-warmup 30 --no-eval --epochs 100 >>"$OUT/memory.log" 2>&1
        note "memory amp=$amp: $(grep -o 'memory: device peak.*' "$OUT/memory.log" | tail -1 | cut -c1-120) | $(grep -o 'steady state [0-9.]* images/s' "$OUT/memory.log" | tail -1)"
      done
      ;;
    graphs)
      # Whole-step CUDA graphs: their GPU tests, then Liftoff graphs on/off against PyTorch eager (best settings)
      # and PyTorch's own whole-step graph, the same call, same data.
      for name in ${GRAPH_TESTS:-test_models_cuda}; do
        /tmp/bin/$name --gtest_brief=1 >>"$OUT/graphs.log" 2>&1
        note "$name: rc=$? $(tail -3 "$OUT/graphs.log" | grep -E '(PASSED|FAILED)' | tr '\n' ' ')"
      done
      # GRAPH_CFGS: "batch accum amp steps" entries separated by ';'.
      IFS=';' read -ra cfgs <<<"${GRAPH_CFGS:-16 4 off 300;256 1 off 200;256 1 bf16 200}"
      for cfg in "${cfgs[@]}"; do
        set -- $cfg
        tag="b$1x$2-$3"
        for g in on off; do
          /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --batch $1 --accum $2 \
            --amp $3 --cuda-graphs $g --max-steps $4 --timing-warmup 20 --no-eval --epochs 100 >>"$OUT/graphs_$tag.log" 2>&1
          note "graphs $tag liftoff graphs=$g: rc=$? $(grep -o 'steady state [0-9.]* images/s' "$OUT/graphs_$tag.log" | tail -1) | $(grep -o 'CUDA graphs: [^;]*' "$OUT/graphs_$tag.log" | tail -1 | cut -c1-90)"
        done
        variants=("--channels-last" "--channels-last --cuda-graph")
        [ "$3" = off ] && variants=("" "--channels-last" "--cuda-graph")
        for pv in "${variants[@]}"; do
          python3 tools/reference/train_reference.py --device cuda --data-dir $DATA --batch $1 --accum $2 --amp $3 \
            $pv --steps $(( $4 - 20 )) --warmup-steps 20 >>"$OUT/graphs_$tag.log" 2>&1
          note "graphs $tag pytorch [${pv:-eager}]: rc=$? $(grep RESULT "$OUT/graphs_$tag.log" | tail -1)"
        done
      done
      ;;
    conv_algos)
      # cuDNN's choice per convolution (LIFTOFF_CUDNN_LOG=1: the legacy algorithm and the graph API's engines
      # with their timings) for bf16 batch 256 (channels-last: the runtime's layout under autocast).
      LIFTOFF_CUDNN_LOG=1 /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA \
        --batch 256 --amp bf16 --max-steps 80 --timing-warmup 20 --no-eval --epochs 100 >"$OUT/conv_algos_cl1.log" 2>&1
      note "conv algos channels_last: rc=$? $(grep -o 'steady state [0-9.]* images/s' "$OUT/conv_algos_cl1.log" | tail -1)"
      ;;
    kernels)
      # Per-kernel device time (ncu, one metric, clocks left alone) over a couple of steady-state eager steps:
      # Liftoff bf16 against PyTorch bf16 channels-last. Kernel launches after SKIP are profiled.
      M="--csv --metrics gpu__time_duration.sum --clock-control none"
      timeout 200 ncu $M --launch-skip ${LSKIP:-6000} --launch-count 1200 /tmp/bin/train --device cuda --model resnet20 \
        --data-dir $DATA --batch 256 --amp bf16 --cuda-graphs off --no-profile --max-steps 40 --timing-warmup 5 --no-eval \
        --epochs 100 >"$OUT/ncu_liftoff_bf16.csv" 2>"$OUT/ncu_liftoff.err"
      note "ncu liftoff bf16: rc=$? $(grep -c gpu__time_duration "$OUT/ncu_liftoff_bf16.csv") kernels"
      timeout 200 ncu $M --launch-skip ${PSKIP:-15000} --launch-count 1500 python3 tools/reference/train_reference.py \
        --device cuda --data-dir $DATA --batch 256 --amp bf16 --channels-last --steps 20 --warmup-steps 25 \
        >"$OUT/ncu_torch_bf16.csv" 2>"$OUT/ncu_torch.err"
      note "ncu pytorch bf16: rc=$? $(grep -c gpu__time_duration "$OUT/ncu_torch_bf16.csv") kernels"
      gzip -f "$OUT"/ncu_*.csv
      ;;
    ab)
      # A/B of two train binaries in one call (AB_OLD vs /tmp/bin/train), alternating, same settings.
      IFS=';' read -ra cfgs <<<"${AB_CFGS:-16 4 off 300;256 1 off 200}"
      for round in $(seq ${ROUNDS:-3}); do
        for cfg in "${cfgs[@]}"; do
          set -- $cfg
          for bin in ${AB_OLD:-/tmp/bin/train_old} /tmp/bin/train; do
            $bin --device cuda --model resnet20 --data-dir $DATA --batch $1 --accum $2 --amp $3 --max-steps $4 \
              --timing-warmup 20 --no-eval --epochs 100 >>"$OUT/ab.log" 2>&1
            note "ab b$1x$2-$3 $(basename $bin): $(grep -o 'steady state [0-9.]* images/s' "$OUT/ab.log" | tail -1)"
          done
        done
      done
      ;;
    examples)
      # The embedding examples on the GPU: the custom op's CUDA kernels against the CPU, the loop with AMP.
      /tmp/bin/custom_op >"$OUT/examples.log" 2>&1
      note "custom_op: rc=$? $(grep -i -c 'cuda.*vs cpu' "$OUT/examples.log") CUDA checks; $(grep -i 'skip' "$OUT/examples.log" | head -1)"
      /tmp/bin/training_loop --device cuda --amp bf16 --data-dir $DATA >>"$OUT/examples.log" 2>&1
      note "training_loop cuda bf16: rc=$? $(grep 'verdict' "$OUT/examples.log" | tail -1 | cut -c1-160)"
      ;;
    overhead_nvml)
      # Is the report's 6-8% the NVML sampler? --profile at the default 0.1 s and at 1 s, against --no-profile.
      for round in $(seq ${ROUNDS:-3}); do
        for cfg in "--profile 0.1" "--profile 1.0" "--no-profile 0.1"; do
          set -- $cfg
          LIFTOFF_NVML_INTERVAL_S=$2 /tmp/bin/train --device cuda --data-dir $DATA --batch 256 $1 --max-steps 230 \
            --timing-warmup 30 --no-eval --epochs 100 >>"$OUT/overhead.log" 2>&1
          note "overhead b256 $1 nvml=$2 s: $(grep -o 'steady state [0-9.]* images/s' "$OUT/overhead.log" | tail -1)"
        done
      done
      ;;
    memory_cap)
      # A default for LIFTOFF_CUDNN_WORKSPACE_MB: whole-run peak and speed per cap, f32 and fp16.
      for amp in off fp16; do
        for cap in 512 128 64; do
          LIFTOFF_CUDNN_WORKSPACE_MB=$cap /tmp/bin/train --device cuda --model resnet20 --data-dir $DATA --batch 256 \
            --amp $amp --max-steps 230 --timing-warmup 30 --no-eval --epochs 100 >>"$OUT/memory.log" 2>&1
          note "memory amp=$amp cap=${cap}MiB: $(grep -o 'memory: device peak.*' "$OUT/memory.log" | tail -1 | cut -c1-120) | $(grep -o 'steady state [0-9.]* images/s' "$OUT/memory.log" | tail -1)"
        done
      done
      ;;
    verdicts)
      # Planted scenarios for the utilization report's verdict.
      /tmp/bin/export_images --data synthetic --format jpg --image-size 224 --count ${JPEGS:-3000} --out /tmp/jpg224 >/dev/null 2>&1
      mkdir -p /tmp/jpg && ln -sfn /tmp/jpg224 /tmp/jpg/train && ln -sfn /tmp/jpg224 /tmp/jpg/test
      V="--device cuda --no-eval --epochs 100"
      /tmp/bin/train $V --data folder --data-dir /tmp/jpg --model resnet20 --batch 64 --workers 1 --augment cpu --max-steps 25 --timing-warmup 5 --report /tmp/v_input.json >>"$OUT/verdicts.log" 2>&1
      note "planted input-bound: $(grep 'verdict' "$OUT/verdicts.log" | tail -1 | cut -c1-230)"
      /tmp/bin/train $V --data folder --data-dir /tmp/jpg --model simple_cnn --batch 128 --workers 14 --no-pin-memory --augment cpu --max-steps 30 --timing-warmup 5 >>"$OUT/verdicts.log" 2>&1
      note "planted large images, no pin: $(grep 'verdict' "$OUT/verdicts.log" | tail -1 | cut -c1-230)"
      /tmp/bin/train $V --data folder --data-dir /tmp/jpg --model simple_cnn --batch 128 --workers 4 --no-pin-memory --augment cpu --max-steps 30 --timing-warmup 5 >>"$OUT/verdicts.log" 2>&1
      note "planted large images, no pin, 4 workers: $(grep 'verdict' "$OUT/verdicts.log" | tail -1 | cut -c1-230)"
      # A light model, so the unpinned f32 copies (not the model) can hold the step back.
      for w in 14 4; do
        /tmp/bin/train $V --data folder --data-dir /tmp/jpg --model strided_cnn --batch 128 --workers $w --no-pin-memory --augment cpu --max-steps 40 --timing-warmup 8 --report /tmp/v_nopin_$w.json >>"$OUT/verdicts.log" 2>&1
        note "planted strided_cnn, no pin, $w workers: $(grep 'verdict' "$OUT/verdicts.log" | tail -1 | cut -c1-300)"
        /tmp/bin/train $V --data folder --data-dir /tmp/jpg --model strided_cnn --batch 128 --workers $w --pin-memory --augment cpu --max-steps 40 --timing-warmup 8 >>"$OUT/verdicts.log" 2>&1
        note "same, pinned: $(grep -o 'steady state [0-9.]* images/s' "$OUT/verdicts.log" | tail -1) $(grep 'verdict' "$OUT/verdicts.log" | tail -1 | cut -c1-200)"
      done
      /tmp/bin/train $V --data-dir $DATA --model simple_cnn --batch 16 --max-steps 300 --timing-warmup 50 --report /tmp/v_launch.json >>"$OUT/verdicts.log" 2>&1
      note "planted host/launch-bound: $(grep 'verdict' "$OUT/verdicts.log" | tail -1 | cut -c1-230)"
      /tmp/bin/train $V --data-dir $DATA --model resnet56 --batch 1024 --max-steps 30 --timing-warmup 5 --report /tmp/v_compute.json >>"$OUT/verdicts.log" 2>&1
      note "planted compute-bound: $(grep 'verdict' "$OUT/verdicts.log" | tail -1 | cut -c1-230)"
      ;;
    ddp_debug)
      # Hang hunt: short 2-GPU runs under NCCL transport/connection variants; a run still going after 15 s gets
      # every thread's stack printed (SIGUSR1, tools/common/stack_dump.h) into the log.
      export LIFTOFF_DIST_TIMEOUT=20
      for variant in plain NCCL_RUNTIME_CONNECT=0 NCCL_COMM_BLOCKING=1 NCCL_CUMEM_ENABLE=0 NCCL_P2P_DISABLE=1; do
        echo "######## variant $variant" >>"$OUT/ddp_debug.log"
        set --
        [ "$variant" != plain ] && set -- "$variant"
        ( env "$@" NCCL_DEBUG=WARN timeout -s KILL 40 /tmp/bin/train --gpus 2 --model resnet20 --data-dir $DATA \
            --batch 128 --max-steps 30 --no-eval --epochs 100 >>"$OUT/ddp_debug.log" 2>&1
          echo "exit=$?" >>"$OUT/ddp_debug.log" ) &
        for _ in $(seq 15); do sleep 1; pgrep -f 'bin/train --model resnet20' >/dev/null || break; done
        for pid in $(pgrep -f 'bin/train --model resnet20'); do
          echo "######## pid $pid: $(tr '\0' '\n' </proc/$pid/environ | grep -E '^RANK=')" >>"$OUT/ddp_debug.log"
          kill -USR1 $pid; sleep 1
        done
        wait
        note "ddp variant [$variant]: $(tail -1 "$OUT/ddp_debug.log") $(grep -c 'parameter checksum' "$OUT/ddp_debug.log") checksum lines so far"
      done
      unset LIFTOFF_DIST_TIMEOUT
      ;;
    memory)
      # Peak device memory per --amp (whole run and after warm-up) and the cuDNN algorithm choices behind it.
      for cfg in "off" "bf16" "fp16" "fp16 64"; do
        set -- $cfg
        LIFTOFF_CUDNN_LOG=1 LIFTOFF_CUDNN_WORKSPACE_MB=${2:-512} /tmp/bin/train --device cuda --model resnet20 \
          --data-dir $DATA --batch 256 --amp $1 --max-steps 120 --timing-warmup 20 --no-eval --epochs 100 \
          >>"$OUT/memory.log" 2>&1
        note "memory amp=$1 ws-cap=${2:-512}MiB: $(grep -o 'memory: device peak.*' "$OUT/memory.log" | tail -1 | cut -c1-150) | $(grep -o 'steady state [0-9.]* images/s' "$OUT/memory.log" | tail -1)"
      done
      ;;
    compare)
      # CPU vs CUDA, the card's command, with the HTML chart (rendered to PNG back home).
      /tmp/bin/bench --model resnet20 --data-dir $DATA --batch 16 --accum 4 --steps 60 --timing-warmup 10 \
        --html "$OUT/compare.html" >"$OUT/compare.log" 2>&1
      note "bench cpu vs cuda b16x4: rc=$? $(grep -i -E 'images/s|speed' "$OUT/compare.log" | head -3 | tr '\n' ' ' | cut -c1-220)"
      ;;
    resume)
      # --deterministic: a run stopped at step 200 and resumed ends with the same checkpoint, byte for byte;
      # then PyTorch loads the final checkpoint with safetensors and evaluates it.
      D="--device cuda --deterministic --model resnet20 --data-dir $DATA --batch 256 --epochs 3 --lr 0.2"
      rm -rf /tmp/ra /tmp/rb  # a new run refuses a directory holding another run's checkpoints
      /tmp/bin/train $D --checkpoint-dir /tmp/ra --save-every 100 --keep 0 >"$OUT/resume.log" 2>&1
      last=$(ls /tmp/ra/checkpoint-*.safetensors | tail -1)
      /tmp/bin/train $D --checkpoint-dir /tmp/rb --resume /tmp/ra/checkpoint-000000000200.safetensors >>"$OUT/resume.log" 2>&1
      if cmp -s "$last" /tmp/rb/$(basename "$last"); then same=identical; else same=DIFFERENT; fi
      note "resume --deterministic from step 200: final $(basename "$last") $same; liftoff $(grep -o 'accuracy [0-9.]*%' "$OUT/resume.log" | tail -1)"
      python3 tools/reference/load_checkpoint.py "$last" --device cuda --data-dir $DATA >>"$OUT/resume.log" 2>&1
      note "safetensors export into PyTorch: $(grep RESULT "$OUT/resume.log" | tail -1)"
      ;;
    loader_jpeg)
      /tmp/bin/export_images --data synthetic --format jpg --image-size 64 --count 4000 --out /tmp/lj64 >/dev/null 2>&1
      /tmp/bin/export_images --data synthetic --format jpg --image-size 224 --count 1500 --out /tmp/lj224 >/dev/null 2>&1
      /tmp/bin/bench_loader --device cuda --fashion-dir $DATA --folder /tmp/lj64 --folder /tmp/lj224 --workers 1 2 4 8 12 --batch 64 \
        --batches 20 --repeats 2 >"$OUT/loader_jpeg.log" 2>&1
      note "bench_loader cuda: rc=$?"
      cat "$OUT/loader_jpeg.log"
      ;;
    errors)
      # What a user sees when cuDNN cannot be loaded (LIFTOFF_CUDNN_LIBRARY names a file that is not there).
      LIFTOFF_CUDNN_LIBRARY=/nonexistent/libcudnn.so.9 /tmp/bin/doctor >"$OUT/errors.log" 2>&1
      note "doctor without cuDNN: rc=$? $(grep -i -m1 'cudnn' "$OUT/errors.log" | cut -c1-220)"
      LIFTOFF_CUDNN_LIBRARY=/nonexistent/libcudnn.so.9 /tmp/bin/train --device cuda --data-dir $DATA --max-steps 10 \
        --no-eval >>"$OUT/errors.log" 2>&1
      note "train --device cuda without cuDNN: rc=$? $(tail -1 "$OUT/errors.log" | cut -c1-260)"
      ;;
    *) echo "unknown stage $stage" ;;
  esac
done
echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
