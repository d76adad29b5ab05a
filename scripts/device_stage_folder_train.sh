# Stage "folder_train" of scripts/device_call.sh: issue 22's end-to-end check alone (without the decode
# stage's loader benchmarks): ResNet-50 bf16 batch 256 trained from a JPEG folder made from the carried
# photographs with default loader flags, next to the same model on synthetic on-GPU data (model_panel).
# FOLDER_STEPS: training steps (default 80, the first 10 not timed). FOLDER_DECODES: --decode values to run
# (default "auto", the default flags; e.g. "auto cpu gpu").
# The decode stage sources this after making /tmp/jf (the same folder); alone it makes it here.
[ -d /tmp/jf/train ] || /tmp/bin/make_jpeg_folder --out /tmp/jf --photos .devrun/photos/*.jpg --train 3000 \
  --test 64 --min-side 256 --max-side 500 >>"$OUT/folder_train.log" 2>&1
for decode in ${FOLDER_DECODES:-auto}; do
  timeout 300 /tmp/bin/train --device cuda --model resnet50 --image-size 224 --data folder --data-dir /tmp/jf \
    --amp bf16 --batch 256 --max-steps ${FOLDER_STEPS:-80} --timing-warmup 10 --epochs 100 --no-eval \
    --decode "$decode" >/tmp/folder_train.log 2>&1
  note "train resnet50 folder --decode $decode: rc=$? $(steady /tmp/folder_train.log) | GPU busy $(grep -oE 'GPU busy [0-9]+%' /tmp/folder_train.log | tail -1)"
  note "  $(grep 'verdict' /tmp/folder_train.log | tail -1 | cut -c1-300)"
  { echo "#### --decode $decode"; cat /tmp/folder_train.log; } >>"$OUT/folder_train.log"
done
classes=$(ls /tmp/jf/train | wc -l)
timeout 240 /tmp/bin/model_panel --model resnet50 --image-size 224 --batch 256 --amp bf16 --classes "$classes" \
  --steps 30 --warmup 15 >/tmp/folder_panel.log 2>&1
note "resnet50 synthetic on-GPU (model_panel): rc=$? $(grep -oE 'images_per_s=[0-9.]+' /tmp/folder_panel.log)"
cat /tmp/folder_panel.log >>"$OUT/folder_train.log"
