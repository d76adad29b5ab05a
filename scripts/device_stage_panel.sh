# Stage "panel" of scripts/device_call.sh: model_panel (Liftoff, make_model + Trainer defaults) against
# tools/reference/model_panel.py (PyTorch eager and whole-step graph, cudnn.benchmark, channels_last + autocast
# for bf16) on the same GPU, same models, batches and precision. PANEL: "model:size:batch:amp" entries.
for entry in ${PANEL:-resnet18:32:128:bf16 resnet18:32:512:bf16 resnet18:32:128:off resnet50:224:64:bf16 strided_cnn:224:128:bf16 strided_cnn:512:128:bf16}; do
  IFS=: read -r m size batch amp <<<"$entry"
  classes=10; [ "$size" -ge 64 ] && classes=1000
  args="--model $m --image-size $size --batch $batch --amp $amp --classes $classes --steps ${PANEL_STEPS:-30} --warmup ${PANEL_WARMUP:-15}"
  lo=$(timeout 240 /tmp/bin/model_panel $args 2>>"$OUT/panel.err" | grep RESULT)
  # PyTorch's eager and graph modes in one process (each on a freshly built model): one Python start a row.
  pt=$(timeout 420 python3 tools/reference/model_panel.py $args --mode both 2>>"$OUT/panel.err" | grep RESULT)
  pe=$(grep 'mode=eager' <<<"$pt")
  pg=$(grep 'mode=graph' <<<"$pt")
  echo "$lo | $pe | $pg" >>"$OUT/panel.log"
  ips() { grep -oE 'images_per_s=[0-9.]+' <<<"$1" | cut -d= -f2; }
  note "panel $entry: liftoff $(ips "$lo") | torch eager $(ips "$pe") | torch graph $(ips "$pg") | $(grep -oE 'graphs=[a-z]+' <<<"$lo") $(grep -oE 'mfu_pct=[0-9.na/]+' <<<"$lo") $(grep -oE 'params=[0-9]+' <<<"$lo") vs $(grep -oE 'params=[0-9]+' <<<"$pe")"
done
