# Stage "observe" of scripts/device_call.sh (issue 26, items 1-4 on a GPU): a CUDA run with --log and
# --tensorboard, checked for the GPU figures (NVML utilization, caching-allocator memory) in both; the cost of
# the per-record loss read (the same run without the logs); compare of batch 128 vs 64 (per image, one direction).
obs=$OUT/observe
mkdir -p "$obs"
common=(--device cuda --model resnet20 --data-dir $DATA --epochs 2 --max-steps 400 --timing-warmup 20)
timeout 300 /tmp/bin/train "${common[@]}" --batch 128 --log "$obs/m.jsonl" --log-every 20 --tensorboard "$obs/tb" \
  --report "$obs/b128.json" >"$obs/logged.log" 2>&1
note "observe logged run rc=$?: $(grep -E '^done:' "$obs/logged.log" | cut -c1-200)"
python3 - "$obs/m.jsonl" <<'PY' >"$obs/jsonl_check.log" 2>&1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in lines if r["kind"] == "train"]
evals = [r for r in lines if r["kind"] == "eval"]
gpu = [r["gpu_util_pct"] for r in train if r["gpu_util_pct"] is not None]
mem = [r["device_memory"] for r in train if r["device_memory"] is not None]
print(f"train records {len(train)}, steps {sum(r['steps'] for r in train)}, images {sum(r['images'] for r in train)}, "
      f"eval records {len(evals)}, gpu_util_pct in {len(gpu)} (mean {sum(gpu) / max(1, len(gpu)):.0f}), "
      f"device_memory in {len(mem)} (max {max(mem or [0]) / 2**20:.0f} MiB), "
      f"step_ms windows {[round(r['step_ms'], 2) for r in train[:6]]}...")
PY
note "observe jsonl: $(tail -1 "$obs/jsonl_check.log" | cut -c1-300)"
events=$(ls "$obs"/tb/events.out.tfevents.* 2>/dev/null | head -1)
if python3 -c "import google.protobuf, crcmod" 2>/dev/null; then
  python3 tests/tools/read_tfevents.py "$events" --jsonl "$obs/m.jsonl" >"$obs/tb_check.log" 2>&1
  note "observe tensorboard read-back rc=$?: $(grep -cE '^(gpu|memory)/' "$obs/tb_check.log") GPU/memory tags; $(grep -c FAIL "$obs/tb_check.log") failures"
else
  note "observe tensorboard: $(stat -c %s "$events") bytes; gpu/util_pct in $(grep -ac 'gpu/util_pct' "$events") records (no python3-protobuf here to parse)"
fi
timeout 300 /tmp/bin/train "${common[@]}" --batch 128 >"$obs/plain.log" 2>&1
without=$(grep -E '^done:' "$obs/plain.log" | grep -oE 'steady state[^(]*')
with=$(grep -E '^done:' "$obs/logged.log" | grep -oE 'steady state[^(]*')
note "observe cost of the logs (a loss read every 20 steps): without --log/--tensorboard $without; with $with"
note "observe progress line: $(grep -E '^epoch [0-9]+/[0-9]+ .*ETA' "$obs/logged.log" | tail -1 | cut -c1-200)"
timeout 300 /tmp/bin/train "${common[@]}" --batch 64 --report "$obs/b64.json" >"$obs/b64.log" 2>&1
/tmp/bin/compare "$obs/b128.json" "$obs/b64.json" --html "$obs/compare.html" >"$obs/compare.log" 2>&1
note "observe compare rc=$?: $(grep -E '^  (step|images/s) ' "$obs/compare.log" | tr -s ' ' | tr '\n' ';')"
