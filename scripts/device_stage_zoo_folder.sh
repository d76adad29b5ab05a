# Stage "zoo_folder" of scripts/device_call.sh: issue 20's item 7 on the GPU: each zoo model the op set made
# (`train --model NAME --data folder`) trains one epoch from a JPEG folder (made from the carried photographs
# as the decode stage does) with default loader flags and evaluates; a line per model with its exit status,
# steady-state images/s and test accuracy. ZOO_FOLDER_MODELS: "model:px:batch" entries.
[ -d /tmp/jf/train ] || /tmp/bin/make_jpeg_folder --out /tmp/jf --photos .devrun/photos/*.jpg --train 3000 \
  --test 64 --min-side 256 --max-side 500 >>"$OUT/zoo_folder.log" 2>&1
for entry in ${ZOO_FOLDER_MODELS:-resnet18:64:128 mobilenet_v2:64:128 vit_tiny:64:128 resnet50:224:128}; do
  IFS=: read -r m px batch <<<"$entry"
  timeout 240 /tmp/bin/train --device cuda --model "$m" --image-size "$px" --data folder --data-dir /tmp/jf \
    --amp bf16 --batch "$batch" --epochs 1 >/tmp/zoo_folder.log 2>&1
  rc=$?
  { echo "#### $entry rc=$rc"; cat /tmp/zoo_folder.log; } >>"$OUT/zoo_folder.log"
  note "zoo_folder $entry: rc=$rc $(steady /tmp/zoo_folder.log) | $(grep -oE 'test accuracy [0-9.]+%?' /tmp/zoo_folder.log | tail -1)"
done
