# Stage "loader_stall" of scripts/device_call.sh: why a JPEG folder run waits for data while its workers idle
# (issue 22: `--decode cpu` input-bound with 4 workers 42-44% busy on some hosts). ResNet-50 bf16 b256 from the
# folder_train stage's folder (FOLDER_FILES per photograph), each --decode in STALL_DECODES (default cpu) and
# --workers in STALL_WORKERS (default 4), with LIFTOFF_LOADER_STALL_S=STALL_S (default 0.03): every wait for a
# batch longer than that prints the ring (each slot's state and batch, the workers' cursors, the decode lanes'
# next batch) into $OUT/stall_<decode>_<workers>.log. Threads' states are sampled every 0.2 s alongside
# (each thread's name, state and kernel wait channel), and the host's CPU model goes first.
files=${FOLDER_FILES:-6000}
jf=/tmp/jf_$files
[ -d $jf/train ] || /tmp/bin/make_jpeg_folder --out $jf --photos .devrun/photos/*.jpg --train "$files" \
  --test 64 --min-side 256 --max-side 500 >/dev/null 2>&1
note "host: $(nproc) CPUs, $(lscpu | grep -E '^(Model name|Thread\(s\) per core|Socket\(s\))' | tr -s ' ' | tr '\n' ';')"
for decode in ${STALL_DECODES:-cpu}; do
  for workers in ${STALL_WORKERS:-4}; do
    log="$OUT/stall_${decode}_$workers.log"
    LIFTOFF_LOADER_STALL_S=${STALL_S:-0.03} /tmp/bin/train --device cuda --model resnet50 --image-size 224 \
      --data folder --data-dir $jf --amp bf16 --batch 256 --max-steps ${FOLDER_STEPS:-100} --timing-warmup 10 \
      --epochs 100 --no-eval --decode "$decode" --workers "$workers" --report /tmp/stall.json >"$log" 2>&1 &
    pid=$!
    while kill -0 $pid 2>/dev/null; do
      echo "## $(date +%s.%N)"
      for t in /proc/$pid/task/*; do echo "$(cat $t/comm 2>/dev/null) $(cut -d' ' -f3 $t/stat 2>/dev/null) $(cat $t/wchan 2>/dev/null)"; done | sort | uniq -c
      sleep 0.2
    done >"$OUT/threads_${decode}_$workers.log"
    wait $pid
    note "stall --decode $decode --workers $workers: rc=$? $(steady "$log") | $(grep -c 'waited .* for a batch' "$log") stall reports | $(grep 'CPU: main' "$log" | tail -1 | cut -c1-150)"
    note "  ring slots $(python3 -c "import json;print(json.load(open('/tmp/stall.json'))['loader'].get('ring_slots'))" 2>&1 | tail -1); $(grep 'verdict' "$log" | tail -1 | cut -c1-200)"
  done
done
