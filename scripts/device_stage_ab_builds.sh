# Stage "ab_builds" of scripts/device_call.sh: a baseline build against this one on model_panel, with
# variants of this build's settings, alternating in rounds in one call, PyTorch's best mode once a row.
# Pack the baseline with `OLD_BINS=model_panel scripts/pack_device_run.sh build base-build`.
# AB_MODELS: "model:size:batch:amp:rounds" entries; AB_VARIANTS: "old" (the baseline), "new" (this build as
# is) or NAME=VALUE (this build with that setting). Every run reads one algorithm store, which the baseline's
# first run writes, so the variants differ by the change alone, not by their searches' choices.
# AB_NCU=1: then per-launch time and DRAM bytes of the kernels matching AB_NCU_KERNELS (a regex), one eager
# step of the first model, baseline and this build (ncu; after the timings, with no store).
# Logs: $OUT/ab_builds.log; the note lines are the summary.
export LIFTOFF_CONV_CACHE=/tmp/ab_builds_store
ab_ips() { grep -oE 'images_per_s=[0-9.]+' <<<"$1" | cut -d= -f2; }
ab_run() {  # ab_run <label> <variant> <model_panel args...>
  local label=$1 variant=$2 dir=bin
  shift 2
  local settings=(X_AB=1)
  case "$variant" in old) dir=old ;; new) ;; *) settings=("$variant") ;; esac
  [ -x /tmp/$dir/model_panel ] || { note "ab_builds: no /tmp/$dir/model_panel"; return; }
  local res
  res=$(env "${settings[@]}" timeout 120 /tmp/$dir/model_panel "$@" 2>>"$OUT/ab_builds.err" | grep RESULT)
  echo "$label $variant | $res" >>"$OUT/ab_builds.log"
  note "ab_builds $label $variant: $(ab_ips "$res")"
}
for entry in ${AB_MODELS:-resnet18:32:512:off:2 resnet18:32:128:off:1}; do
  IFS=: read -r m size batch amp rounds <<<"$entry"
  classes=10; [ "$size" -ge 64 ] && classes=1000
  args=(--model "$m" --image-size "$size" --batch "$batch" --amp "$amp" --classes "$classes" --steps 60 --warmup 20)
  ab_run "$m:$size:$batch:$amp store" old "${args[@]}" >/dev/null
  for round in $(seq 1 "${rounds:-1}"); do
    for variant in ${AB_VARIANTS:-old new}; do ab_run "$m:$size:$batch:$amp r$round" "$variant" "${args[@]}"; done
  done
  pt=$(timeout 240 python3 tools/reference/model_panel.py "${args[@]}" --mode both --memory-format channels_last \
    2>>"$OUT/ab_builds.err" | grep RESULT)
  echo "$m:$size:$batch:$amp torch | $pt" >>"$OUT/ab_builds.log"
  note "ab_builds $m:$size:$batch:$amp torch: eager $(ab_ips "$(grep mode=eager <<<"$pt")") graph $(ab_ips "$(grep mode=graph <<<"$pt")")"
done
unset LIFTOFF_CONV_CACHE
if [ "${AB_NCU:-0}" = 1 ]; then
  IFS=: read -r m size batch amp _ <<<"${AB_MODELS%% *}"
  m=${m:-resnet18} size=${size:-32} batch=${batch:-512} amp=${amp:-off}
  classes=10; [ "$size" -ge 64 ] && classes=1000
  for dir in old bin; do
    timeout 120 ncu --profile-from-start off --cache-control none --clock-control none \
      --kernel-name regex:"${AB_NCU_KERNELS:-nhwc}" --csv --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      /tmp/$dir/model_panel --model "$m" --image-size "$size" --batch "$batch" --amp "$amp" --classes "$classes" \
      --cuda-graphs off --warmup 3 --steps 3 --profile-steps 1 >"$OUT/ab_ncu_$dir.csv" 2>>"$OUT/ab_builds.err"
    note "ab_builds ncu $dir: rc=$? $(python3 scripts/ncu_summary.py "$OUT/ab_ncu_$dir.csv" 1 0 2>/dev/null | head -1)"
  done
fi
