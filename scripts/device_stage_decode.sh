# Stage "decode" of scripts/device_call.sh: a JPEG folder made from the carried photographs (.devrun/photos),
# then the decode tests and bench_loader's GPU/CPU decode rows.
/tmp/bin/make_jpeg_folder --out /tmp/jf --photos .devrun/photos/*.jpg --train 3000 --test 64 --min-side 256 \
  --max-side 500 >"$OUT/decode.log" 2>&1
timeout 200 /tmp/bin/test_data_cuda --gtest_brief=1 --gtest_filter='*Decode*:*Nvjpeg*' >>"$OUT/decode.log" 2>&1
note "decode tests: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/decode.log" | tr '\n' ' ')"
timeout 240 /tmp/bin/bench_loader --fashion-dir '' --device cuda --folder /tmp/jf/train --workers 14 --batch 256 \
  --batches 10 --decode gpu cpu --nvjpeg-backend auto hardware gpu-hybrid --no-fixed-size >>"$OUT/decode.log" 2>&1
note "bench_loader rc=$?: $(grep -iE 'images/s' "$OUT/decode.log" | tail -8 | tr '\n' ';' | head -c 1200)"
timeout 200 python3 tools/reference/decode_reference.py /tmp/jf/train --batch 256 --size 224 >>"$OUT/decode.log" 2>&1
note "torchvision: $(grep RESULT "$OUT/decode.log" | tail -1)"
