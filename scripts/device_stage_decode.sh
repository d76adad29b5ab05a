# Stage "decode" of scripts/device_call.sh: a JPEG folder made from the carried photographs (.devrun/photos),
# the decode tests, bench_loader's GPU decode at 224 px with 1, 2 and 4 batches in flight (decode lanes) per
# nvJPEG backend, the hardware engine's call size and share, the CPU decode row, torchvision's batched nvJPEG
# decode on the same files, then ResNet-50 trained from the JPEG folder next to the same model on synthetic
# on-GPU data (model_panel) unless DECODE_FOLDER=0. PyTorch's DataLoader (PIL, DECODE_TORCH_WORKERS, default
# 14 workers) on the same files next to the CPU row. Logs in $OUT/decode.log; the note lines are the summary.
/tmp/bin/make_jpeg_folder --out /tmp/jf --photos .devrun/photos/*.jpg --train 3000 --test 64 --min-side 256 \
  --max-side 500 >"$OUT/decode.log" 2>&1
timeout 200 /tmp/bin/test_data_cuda --gtest_brief=1 --gtest_filter='*Decode*:*Nvjpeg*' >>"$OUT/decode.log" 2>&1
note "decode tests: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/decode.log" | tr '\n' ' ')"
bench() {  # bench_loader rows at 224 px, 14 workers, batch 256; prints the rows' "name | images/s" lines
  timeout 240 /tmp/bin/bench_loader --fashion-dir '' --device cuda --folder /tmp/jf/train --workers 14 --batch 256 \
    --batches ${DECODE_BATCHES:-40} --no-fixed-size "$@" >/tmp/decode_bench.log 2>&1
  local rc=$?
  cat /tmp/decode_bench.log >>"$OUT/decode.log"
  [ $rc = 0 ] || echo "bench_loader rc=$rc: $(tail -1 /tmp/decode_bench.log)"
  grep -E '^  decode ' /tmp/decode_bench.log | sed -E 's/ +\| +/ | /; s/  +/ /g'
}
while read -r line; do note "$line"; done < <(bench --decode gpu --nvjpeg-backend ${DECODE_BACKENDS:-auto hardware gpu-hybrid} \
  --decode-lanes 1 2 4)
if [ "${DECODE_COMBOS:-1}" = 1 ]; then  # DECODE_COMBOS=0 leaves out the call-size / share rows
  while read -r line; do note "$line"; done < <(bench --decode gpu --nvjpeg-backend auto --decode-lanes 2 4 \
    --hardware-batch 0 -1 --hardware-share 1 0.65)
fi
while read -r line; do note "$line"; done < <(bench --decode cpu --decode-lanes 2)
timeout 200 python3 tools/reference/decode_reference.py /tmp/jf/train --batch 256 --size 224 \
  --dataloader-workers ${DECODE_TORCH_WORKERS:-14} >>"$OUT/decode.log" 2>&1
while read -r line; do note "torch: $line"; done < <(grep RESULT "$OUT/decode.log")
# ResNet-50 from the JPEG folder (default loader flags) against synthetic on-GPU data: the folder_train stage
# (DECODE_FOLDER=0 leaves it out, e.g. when folder_train ran first in the call).
[ "${DECODE_FOLDER:-1}" = 1 ] && source scripts/device_stage_folder_train.sh
