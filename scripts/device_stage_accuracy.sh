# Stage "accuracy" of scripts/device_call.sh: the op-set issue's zoo models trained on Fashion-MNIST (15 epochs,
# bf16), with the recipe per model (ACC_MODELS overrides the list). The final test accuracy is reported.
recipe() {
  case "$1" in
    vit_tiny) echo "--optimizer adamw --lr 1e-3 --wd 0.05 --batch 256 --label-smoothing 0.1" ;;
    *) echo "--optimizer sgd --lr 0.2 --wd 5e-4 --batch 256 --label-smoothing 0.1" ;;
  esac
}
for m in ${ACC_MODELS:-resnet18 mobilenet_v2 vit_tiny}; do
  log="$OUT/accuracy_$m.log"
  # shellcheck disable=SC2046
  timeout 200 /tmp/bin/train --device cuda --model $m --data-dir $DATA --amp bf16 --epochs ${ACC_EPOCHS:-15} \
    $(recipe $m) >"$log" 2>&1
  note "accuracy $m rc=$?: $(grep -E '^done:' "$log" | tail -1 | cut -c1-220) | $(grep -iE 'CUDA graphs:' "$log" | tail -1 | cut -c1-120)"
done
