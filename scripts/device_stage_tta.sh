# Stage "tta" of scripts/device_call.sh: time to 94% test accuracy on Fashion-MNIST (issue 23), data loading
# and evaluation included, for 2-3 candidate recipes x 5 seeds, then PyTorch's best equivalent recipe
# (tools/reference/time_to_accuracy.py: same model, epochs, batch, LR and its scaling, bf16 autocast,
# channels_last, cudnn.benchmark, label smoothing, one-cycle, EMA, flip and shift averaging, --eval-every) on the same seeds.
# Goal: every seed >= 94.0%, median wall <= 5 s, PyTorch's median / ours >= 8.
# Knobs: TTA_CANDIDATES (names, default "Y10": the recipe in the README), TTA_SEEDS (default "1 2 3 4 5"), TTA_TORCH (candidates
# PyTorch runs, default "Y10"; "" for none), TTA_TORCH_SEEDS (its seeds, default TTA_SEEDS), TTA_EXTRA (extra train flags, e.g. --no-profile),
# TTA_STORE (cold: each run searches its convolution algorithms, as a first run; warm: restored from the store
# a one-epoch run of the recipe wrote, as a user's later runs).
tta_recipe() {
  local common="--amp bf16 --label-smoothing 0.1 --wd 5e-4 --lr 0.2"
  local r20="--model resnet20 $common" r18="--model resnet18 $common" r9="--model resnet9 $common"
  case "$1" in
    A) echo "$r20 --batch 512 --lr-scale linear --epochs 10 --ema 0.99 --tta-flip" ;;
    B) echo "$r20 --batch 1024 --lr-scale sqrt --epochs 14 --ema 0.98 --tta-flip" ;;
    C) echo "$r20 --batch 512 --lr-scale linear --epochs 14 --ema 0.99 --tta-flip" ;;
    D) echo "$r20 --batch 512 --lr-scale linear --epochs 12 --ema 0.99 --tta-flip" ;;
    E) echo "$r18 --batch 512 --lr-scale linear --epochs 6 --ema 0.99 --tta-flip" ;;
    F) echo "$r18 --batch 512 --lr-scale linear --epochs 8 --ema 0.99 --tta-flip" ;;
    G) echo "$r18 --batch 1024 --lr-scale sqrt --epochs 8 --ema 0.98 --tta-flip" ;;
    # E-G did not train stably at the scaled LR 0.4 (session 11): ResNet-18 at 0.1, unscaled.
    H) echo "${r18/--lr 0.2/--lr 0.1} --batch 512 --epochs 6 --ema 0.99 --tta-flip" ;;
    I) echo "${r18/--lr 0.2/--lr 0.1} --batch 512 --epochs 8 --ema 0.99 --tta-flip" ;;
    # ResNet-18 at 28 px runs ~0.6 s an epoch at batch 512: 5 epochs fit the 5 s goal with evaluation.
    J) echo "${r18/--lr 0.2/--lr 0.1} --batch 512 --epochs 5 --ema 0.99 --tta-flip" ;;
    K) echo "${r18/--lr 0.2/--lr 0.1} --batch 256 --epochs 5 --ema 0.99 --tta-flip" ;;
    # C with the image's one-pixel shifts averaged at evaluation (--tta-shift, session 18); M: two epochs
    # fewer; N: label smoothing 0.2; O: evaluated at epochs 7 and 14 only (--eval-every: one-cycle reaches
    # 94% in its last epochs, so the earlier evaluations only cost time).
    L) echo "$r20 --batch 512 --lr-scale linear --epochs 14 --ema 0.99 --tta-flip --tta-shift" ;;
    M) echo "$r20 --batch 512 --lr-scale linear --epochs 12 --ema 0.99 --tta-flip --tta-shift" ;;
    N) echo "${r20/--label-smoothing 0.1/--label-smoothing 0.2} --batch 512 --lr-scale linear --epochs 14 --ema 0.99 --tta-flip --tta-shift" ;;
    O) echo "$r20 --batch 512 --lr-scale linear --epochs 14 --ema 0.99 --tta-flip --tta-shift --eval-every 7" ;;
    # P, Q: the shorter runs evaluated twice (the 5 s goal leaves ~11 epochs at 0.43 s each).
    P) echo "$r20 --batch 512 --lr-scale linear --epochs 12 --ema 0.99 --tta-flip --tta-shift --eval-every 6" ;;
    Q) echo "$r20 --batch 512 --lr-scale linear --epochs 10 --ema 0.99 --tta-flip --tta-shift --eval-every 5" ;;
    # R-U (session 19): more accuracy per second. ResNet-18 at LR 0.1 for 5-6 epochs; label smoothing 0.2 at 12
    # epochs; ResNet-32 for 10; each evaluated once, at the end.
    R) echo "${r18/--lr 0.2/--lr 0.1} --batch 512 --epochs 6 --ema 0.99 --tta-flip --tta-shift --eval-every 6" ;;
    S) echo "${r18/--lr 0.2/--lr 0.1} --batch 512 --epochs 5 --ema 0.99 --tta-flip --tta-shift --eval-every 5" ;;
    T) echo "${r20/--label-smoothing 0.1/--label-smoothing 0.2} --batch 512 --lr-scale linear --epochs 12 --ema 0.99 --tta-flip --tta-shift --eval-every 12" ;;
    U) echo "${r20/resnet20/resnet32} --batch 512 --lr-scale linear --epochs 10 --ema 0.99 --tta-flip --tta-shift --eval-every 10" ;;
    # V: two epochs more than O (14 epochs reached 94% on 4 of 5 seeds in three calls), evaluated at 8 and 16.
    V) echo "$r20 --batch 512 --lr-scale linear --epochs 16 --ema 0.99 --tta-flip --tta-shift --eval-every 8" ;;
    # W-Z (session 20): Page's ResNet-9 (8.8x ResNet-20's FLOPs in 8 convolutions, not 21: a step of a few large
    # convolutions instead of many small ones) for 5-10 epochs, evaluated twice or once.
    W) echo "$r9 --batch 512 --lr-scale linear --epochs 8 --ema 0.99 --tta-flip --tta-shift --eval-every 4" ;;
    X) echo "$r9 --batch 512 --lr-scale linear --epochs 6 --ema 0.99 --tta-flip --tta-shift --eval-every 6" ;;
    Y) echo "$r9 --batch 512 --lr-scale linear --epochs 10 --ema 0.99 --tta-flip --tta-shift --eval-every 5" ;;
    Z) echo "$r9 --batch 512 --lr-scale linear --epochs 5 --ema 0.99 --tta-flip --tta-shift --eval-every 5" ;;
    # Y10: Y evaluated once, at the end (the 5-epoch evaluation only costs time).
    Y10) echo "$r9 --batch 512 --lr-scale linear --epochs 10 --ema 0.99 --tta-flip --tta-shift --eval-every 10" ;;
    *) echo "" ;;
  esac
}
tta_median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "n/a"; else if (NR%2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2}'; }
# tta_summary <label> <file of "accuracy wall train" lines, "-" for an unreached time>
tta_summary() {
  local all_ok=yes
  awk '$1 < 94.0 || $2 == "-" {bad=1} END {exit bad}' "$2" || all_ok=no
  note "tta $1: seeds=$(wc -l <"$2") every seed >= 94%: $all_ok | accuracy $(awk '{printf "%s ", $1}' "$2")| median wall $(awk '$2!="-"{print $2}' "$2" | tta_median) s, training $(awk '$3!="-"{print $3}' "$2" | tta_median) s"
}
tta_drop_last=""
/tmp/bin/train --help 2>/dev/null | grep -q -- "--drop-last" && tta_drop_last="--drop-last"  # ours drops by default then
for cand in ${TTA_CANDIDATES:-Y10}; do
  R=$(tta_recipe "$cand")
  [ -n "$R" ] || { note "tta: unknown candidate $cand"; continue; }
  log="$OUT/tta_$cand.log"
  echo "#### candidate $cand: $R" >>"$log"
  : >"/tmp/tta_$cand.txt"
  if [ "${TTA_STORE:-cold}" = warm ]; then
    # A user's second run: the convolution algorithms come from the store an earlier run of the recipe wrote
    # (one epoch, another seed, not timed).
    export LIFTOFF_CONV_CACHE=/tmp/tta_store_$cand
    # shellcheck disable=SC2086
    /tmp/bin/train --device cuda --data-dir "$DATA" $R --epochs 1 --seed 99 >/dev/null 2>&1
  fi
  for seed in ${TTA_SEEDS:-1 2 3 4 5}; do
    echo "#### liftoff $cand seed $seed (algorithm store: ${TTA_STORE:-cold})" >>"$log"
    # cold: every run searches (a fresh, empty store), as a first run on a machine does.
    [ "${TTA_STORE:-cold}" = warm ] || export LIFTOFF_CONV_CACHE=$(mktemp -d)
    # shellcheck disable=SC2086
    timeout 120 /tmp/bin/train --device cuda --data-dir "$DATA" $R --seed "$seed" --target-accuracy 94 \
      ${TTA_EXTRA:-} >"/tmp/tta_run.log" 2>&1
    rc=$?
    cat /tmp/tta_run.log >>"$log"
    acc=$(grep -oE 'final test accuracy [0-9.]+' /tmp/tta_run.log | grep -oE '[0-9.]+$')
    # "time to 94.00% test accuracy: 4.61 s (epoch 10; ...); 4.30 s of training alone (...)"
    read -r wall train <<<"$(grep -E '^time to ' /tmp/tta_run.log | grep -oE '[0-9.]+ s' | tr -d ' s' | tr '\n' ' ')"
    wall=${wall:--} train=${train:--}
    echo "${acc:-0} $wall $train" >>"/tmp/tta_$cand.txt"
    note "tta $cand seed $seed liftoff rc=$rc: accuracy ${acc:-?}% | time to 94%: wall $wall s, training alone $train s"
  done
  # The warm store's choices come back (which heuristic place won tells how many candidates a search needs).
  [ "${TTA_STORE:-cold}" = warm ] && cat /tmp/tta_store_"$cand"/*.tsv >"$OUT/store_$cand.tsv" 2>/dev/null
  unset LIFTOFF_CONV_CACHE
  tta_summary "$cand liftoff (${TTA_STORE:-cold})" "/tmp/tta_$cand.txt"
done
for cand in ${TTA_TORCH-Y10}; do
  R=$(tta_recipe "$cand")
  [ -n "$R" ] || continue
  # The reference takes train's recipe flags under the same names.
  log="$OUT/tta_${cand}_pytorch.log"
  : >"/tmp/tta_${cand}_torch.txt"
  for seed in ${TTA_TORCH_SEEDS:-${TTA_SEEDS:-1 2 3 4 5}}; do
    echo "#### pytorch $cand seed $seed" >>"$log"
    # shellcheck disable=SC2086
    timeout 150 python3 tools/reference/time_to_accuracy.py --data-dir "$DATA" $R $tta_drop_last --seed "$seed" \
      --target-accuracy 94 >"/tmp/tta_run.log" 2>&1
    rc=$?
    cat /tmp/tta_run.log >>"$log"
    res=$(grep RESULT /tmp/tta_run.log | tail -1)
    acc=$(echo "$res" | grep -oE 'accuracy=[0-9.]+' | cut -d= -f2)
    reached=$(echo "$res" | grep -oE 'reached=[01]' | cut -d= -f2)
    wall=$(echo "$res" | grep -oE 'wall_s=[0-9.]+' | cut -d= -f2)
    train=$(echo "$res" | grep -oE 'train_s=[0-9.]+' | cut -d= -f2)
    [ "$reached" = 1 ] || { wall=-; train=-; }
    echo "$(awk -v a="${acc:-0}" 'BEGIN {printf "%.2f", 100 * a}') ${wall:--} ${train:--}" >>"/tmp/tta_${cand}_torch.txt"
    note "tta $cand seed $seed pytorch rc=$rc: $res"
  done
  tta_summary "$cand pytorch" "/tmp/tta_${cand}_torch.txt"
  ours=$(awk '$2!="-"{print $2}' "/tmp/tta_$cand.txt" | tta_median)
  theirs=$(awk '$2!="-"{print $2}' "/tmp/tta_${cand}_torch.txt" | tta_median)
  note "tta $cand: PyTorch median wall / Liftoff median wall = $(awk -v a="$theirs" -v b="$ours" 'BEGIN {if (a+0 > 0 && b+0 > 0) printf "%.1fx", a / b; else print "n/a"}')"
done
