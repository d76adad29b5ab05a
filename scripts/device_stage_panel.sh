# Stage "panel" of scripts/device_call.sh: model_panel (Liftoff, make_model + Trainer defaults) against
# tools/reference/model_panel.py (PyTorch eager and whole-step graph, cudnn.benchmark, autocast for bf16, each
# in channels_last and NCHW: the faster format counts) on the same GPU, same models, batches and precision.
# PANEL: "model:size:batch:amp" entries. PANEL_TORCH_FORMATS: --memory-format of the reference (default both).
for entry in ${PANEL:-resnet18:32:128:bf16 resnet18:32:512:bf16 resnet18:32:128:off resnet50:224:64:bf16 strided_cnn:224:128:bf16 strided_cnn:512:128:bf16}; do
  IFS=: read -r m size batch amp <<<"$entry"
  classes=10; [ "$size" -ge 64 ] && classes=1000
  args="--model $m --image-size $size --batch $batch --amp $amp --classes $classes --steps ${PANEL_STEPS:-30} --warmup ${PANEL_WARMUP:-15}"
  lo=$(timeout 240 /tmp/bin/model_panel $args 2>>"$OUT/panel.err" | grep RESULT)
  # PyTorch's eager and graph modes in one process (each on a freshly built model): one Python start a row.
  pt=$(timeout 420 python3 tools/reference/model_panel.py $args --mode both \
    --memory-format "${PANEL_TORCH_FORMATS:-both}" 2>>"$OUT/panel.err" | grep RESULT)
  # Per mode, the faster memory format's line.
  fastest() { grep "mode=$1" <<<"$pt" | awk '{for (i = 1; i <= NF; ++i) if ($i ~ /^images_per_s=/) {split($i, v, "="); print v[2], $0}}' | sort -gr | head -1 | cut -d' ' -f2-; }
  pe=$(fastest eager)
  pg=$(fastest graph)
  echo "$lo | $pe | $pg" >>"$OUT/panel.log"
  ips() { grep -oE 'images_per_s=[0-9.]+' <<<"$1" | cut -d= -f2; }
  note "panel $entry: liftoff $(ips "$lo") | torch eager $(ips "$pe") $(grep -oE 'format=[a-z_]+' <<<"$pe") | torch graph $(ips "$pg") $(grep -oE 'format=[a-z_]+' <<<"$pg") | $(grep -oE 'graphs=[a-z]+' <<<"$lo") $(grep -oE 'mfu_pct=[0-9.na/]+' <<<"$lo") $(grep -oE 'params=[0-9]+' <<<"$lo") vs $(grep -oE 'params=[0-9]+' <<<"$pe")"
done
