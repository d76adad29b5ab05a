# Stage "hybrid_diag" of scripts/device_call.sh: a short ResNet-50 bf16 run from a small JPEG folder (DIAG_FILES
# per photograph, default 1500: ~12 batches an epoch, so 60 steps cross several epoch ends) with each
# --decode value in DIAG_DECODES (default "auto cpu"), logging every 5 steps straight into $OUT. A run still
# alive after DIAG_TIMEOUT seconds (default 90) is a hang: SIGUSR1 makes train print every thread's stack into its log, and each
# thread's kernel wait channel goes to $OUT/hang_<decode>.log, before it is killed.
files=${DIAG_FILES:-1500}
jf=/tmp/jf_$files
[ -d $jf/train ] || /tmp/bin/make_jpeg_folder --out $jf --photos .devrun/photos/*.jpg --train "$files" \
  --test 64 --min-side 256 --max-side 500 >/dev/null 2>&1
for decode in ${DIAG_DECODES:-auto cpu}; do
  log="$OUT/diag_$decode.log"
  /tmp/bin/train --device cuda --model resnet50 --image-size 224 --data folder --data-dir $jf --amp bf16 \
    --batch 256 --max-steps ${DIAG_STEPS:-60} --timing-warmup 10 --epochs 100 --no-eval --decode "$decode" \
    --log-every 5 >"$log" 2>&1 &
  pid=$!
  start=$SECONDS
  while kill -0 $pid 2>/dev/null && [ $((SECONDS - start)) -lt ${DIAG_TIMEOUT:-90} ]; do sleep 1; done
  if kill -0 $pid 2>/dev/null; then
    note "hybrid_diag --decode $decode: HUNG (alive after ${DIAG_TIMEOUT:-90} s); $(grep -c . "$log") log lines"
    # train dumps every thread's stack to stderr on SIGUSR1 (into the run's log); the wait channels too.
    kill -USR1 $pid; sleep 5
    for t in /proc/$pid/task/*; do echo "$t $(cat $t/comm) $(cat $t/wchan) $(cut -d' ' -f3 $t/stat)"; done >"$OUT/hang_$decode.log"
    kill -9 $pid
  else
    wait $pid
    note "hybrid_diag --decode $decode: rc=$? $(steady "$log") | $(grep -oE 'hybrid CPU share [^;]*' "$log" | tail -1) | $(grep verdict "$log" | tail -1 | cut -c1-160)"
  fi
done
