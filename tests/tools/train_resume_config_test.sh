#!/usr/bin/env bash
# End-to-end checks of train's configuration (CPU, synthetic data): --resume restores the stored flags and
# extends a run, unsafe changes are refused, --config / --print-config round-trip, PyTorch spellings and
# "did you mean", --init-from a python3-torch state_dict, and a checkpoint of the older format 1.
#   train_resume_config_test.sh <path to train> <source folder>
set -uo pipefail
TRAIN=$1
SRC=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # check <description> <command...>
run=("$TRAIN" --device cpu --threads 2 --data synthetic --synthetic-size 512 --model simple_cnn --batch 32
     --workers 1 --no-profile --no-eval)

# 1. --resume DIR with only --epochs: the stored flags come back and the run goes on from step 16 to 32.
"${run[@]}" --epochs 1 --checkpoint-dir "$work/a" >"$work/a.log" 2>&1
"$TRAIN" --resume "$work/a" --epochs 2 >"$work/b.log" 2>&1
check "--resume DIR --epochs 2 (no other flag) exits 0" test $? -eq 0
check "... says --epochs overrides the stored value" grep -q "note: --epochs 2 overrides the checkpoint's 1" "$work/b.log"
check "... runs the stored model on the stored data" grep -q "model simple_cnn .* data synthetic: 512 train" "$work/b.log"
check "... continues from the saved step" grep -q "resumed from .*checkpoint-000000000016.safetensors (epoch 2, step 16" "$work/b.log"
check "... to the new end" grep -q "^done: 32 optimizer steps" "$work/b.log"
check "... and saves there" test -f "$work/a/checkpoint-000000000032.safetensors"
"$TRAIN" --resume "$work/a" --epochs 3 --log "$work/m.jsonl" --log-every 5 >"$work/c.log" 2>&1
check "a new --log path on resume is taken, with a note" \
  bash -c "grep -q 'note: --log $work/m.jsonl is taken' '$work/c.log' && test -s '$work/m.jsonl'"

# 2. What defines the trained model is refused with the reason.
for change in "--batch 64" "--amp bf16" "--model resnet20" "--lr 0.05"; do
  "$TRAIN" --resume "$work/a" $change >"$work/r.log" 2>&1
  rc=$?
  name=${change%% *}
  check "--resume with $change exits 2 naming ${name#--}" \
    bash -c "test $rc -eq 2 && grep -q 'flags differ from the checkpointed run .*${name#--} (checkpoint' '$work/r.log'"
done
"$TRAIN" --resume "$work/a" --max-steps 5 >"$work/r.log" 2>&1
check "--max-steps below the checkpoint's step exits 2" bash -c "test $? -eq 2 && grep -q 'pass --max-steps 48 or more' '$work/r.log'"

# 3. --print-config writes what --config reads back; the command line overrides the file.
"${run[@]}" --epochs 1 --batch-size 16 -j 1 --weight-decay 0.001 --no-nesterov --print-config >"$work/c1.toml"
check "--print-config exits 0" test $? -eq 0
"$TRAIN" --config "$work/c1.toml" --print-config >"$work/c2.toml"
check "--config reads --print-config's file back unchanged" cmp -s "$work/c1.toml" "$work/c2.toml"
check "... the PyTorch spellings set the same flags" \
  bash -c "grep -qx 'batch = 16' '$work/c1.toml' && grep -qx 'wd = 0.001' '$work/c1.toml' && grep -qx 'nesterov = false' '$work/c1.toml'"
"$TRAIN" --config "$work/c1.toml" --max-steps 10 >"$work/cf.log" 2>&1
check "a run from --config uses the file's flags" grep -q "batch 16 x accum 1" "$work/cf.log"
"$TRAIN" --resume "$work/a" --print-config >"$work/c3.toml"
check "--resume --print-config shows the stored flags" grep -qx 'model = "simple_cnn"' "$work/c3.toml"

# 4. Flag errors read well.
"$TRAIN" --batchsize 8 >"$work/f1.log" 2>&1
check "an unknown flag exits 2 with a 'did you mean'" \
  bash -c "test $? -eq 2 && grep -q 'unknown flag --batchsize; did you mean --batch-size?' '$work/f1.log'"
"$TRAIN" --lr 0 >"$work/f2.log" 2>&1
check "--lr 0 says what it must be, without DBL_MAX" bash -c "grep -q -- '--lr: 0 must be > 0' '$work/f2.log' && test \$(wc -c <'$work/f2.log') -lt 200"
"$TRAIN" --momentum 2 >"$work/f3.log" 2>&1
check "a range error prints the range readably" grep -q -- "--momentum: 2 is not in \[0, 0.999999\]" "$work/f3.log"
"$TRAIN" --help >"$work/h.log"
check "the help shows aliases and negations plainly" \
  bash -c "grep -q -- '--nesterov, --no-nesterov  *Nesterov' '$work/h.log' && ! grep -q '{false}' '$work/h.log' && grep -q -- '--batch, --batch-size' '$work/h.log'"

# 5. --init-from: a state_dict written by python3-torch (tools/reference/write_state_dict.py).
torch_file="$SRC/tests/models/train/data/strided_cnn_torch.safetensors"
"${run[@]}" --model strided_cnn --epochs 1 --max-steps 10 --init-from "$torch_file" >"$work/i.log" 2>&1
check "--init-from a PyTorch state_dict exits 0" bash -c "test $? -eq 0 && grep -q 'initial weights from $torch_file' '$work/i.log'"
"${run[@]}" --epochs 1 --init-from "$torch_file" >"$work/i2.log" 2>&1
check "--init-from into another architecture exits 2 listing the names" \
  bash -c "test $? -eq 2 && grep -q 'missing 6 key(s): conv1.bias.*unexpected 8 key(s): conv3.weight' '$work/i2.log'"
"${run[@]}" --epochs 1 --init-from "$torch_file" --resume "$work/a" >"$work/i3.log" 2>&1
check "--init-from with --resume is a usage error" test $? -eq 2

# 6. A checkpoint of format 1 (before header checksums) resumes, with a warning.
mkdir -p "$work/old"
python3 - "$work/a/checkpoint-000000000016.safetensors" "$work/old/checkpoint-000000000016.safetensors" <<'PY'
import json, struct, sys, zlib
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
meta = header.pop("__metadata__")
renamed = {(k if k.startswith(("optimizer/", "extra/")) else "model/" + k): v for k, v in header.items()}
order = sorted(renamed.items(), key=lambda kv: kv[1]["data_offsets"][0])
meta = {k: v for k, v in meta.items() if k not in ("liftoff.crc32", "liftoff.run")}
meta["liftoff.format"] = "liftoff-checkpoint-1"
meta["liftoff.data_crc32"] = str(zlib.crc32(b"".join(data[v["data_offsets"][0]:v["data_offsets"][1]] for _, v in order)))
renamed["__metadata__"] = meta
text = json.dumps(renamed).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data)
PY
"$TRAIN" --resume "$work/old" --epochs 2 >"$work/o.log" 2>&1
check "a format-1 checkpoint resumes (exit 0)" test $? -eq 0
check "... with a warning that its header had no checksum" grep -q "warning: .*older format 'liftoff-checkpoint-1'" "$work/o.log"
check "... continuing that run in its directory" test -f "$work/old/checkpoint-000000000032.safetensors"

exit $fail
