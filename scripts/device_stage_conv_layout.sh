# Stage "conv_layout" of scripts/device_call.sh: model_panel under each LIFTOFF_CONV_LAYOUT value (input: the
# input's own layout, NCHW; auto: channels-last), alternating, LAYOUT_ROUNDS rounds (default 2), to choose the fp32 rule by measurement.
# LAYOUT_PANEL: "model:size:batch:amp" entries (default the fp32 panel rows).
for round in $(seq 1 "${LAYOUT_ROUNDS:-2}"); do
  for entry in ${LAYOUT_PANEL:-mobilenet_v2:32:128:off resnet18:32:128:off strided_cnn:224:128:off vit_tiny:32:128:off}; do
    IFS=: read -r m size batch amp <<<"$entry"
    classes=10; [ "$size" -ge 64 ] && classes=1000
    for layout in input auto; do
      r=$(LIFTOFF_CONV_LAYOUT=$layout timeout 240 /tmp/bin/model_panel --model "$m" --image-size "$size" \
        --batch "$batch" --amp "$amp" --classes "$classes" --steps 30 --warmup 15 2>>"$OUT/conv_layout.err" | grep RESULT)
      echo "round $round $entry $layout $r" >>"$OUT/conv_layout.log"
      note "conv_layout r$round $entry $layout: $(grep -oE 'images_per_s=[0-9.]+' <<<"$r")"
    done
  done
done
