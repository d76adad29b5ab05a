#!/usr/bin/env python3
"""Cross-check: loads a Liftoff checkpoint with Python's `safetensors` into the PyTorch ResNet of
tools/reference/resnet_cifar.py (same state-dict names) and evaluates test accuracy on Fashion-MNIST.
Never used at run time; it proves that the files are standard safetensors and that the weights mean the same.

The checkpoint layout (models/train/checkpoint.h, docs/checkpoints.md): format 3 stores the model tensors under
their state_dict names and the rest as "optimizer/<name>", "extra/<name>" (formats 1 and 2: "model/<name>");
metadata "liftoff.model" (e.g. resnet20), "liftoff.step", ... Only the model tensors are used here.

Prints one machine-readable line at the end:  RESULT accuracy=<a> images=<n> step=<s> model=<name>
Example:
  python3 tools/reference/load_checkpoint.py runs/ckpt/checkpoint-000000001000.safetensors --device cuda
"""
import argparse
import gzip
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet_cifar import resnet  # noqa: E402

MEAN, STD = 0.2860, 0.3530  # Liftoff's Fashion-MNIST normalisation (data/dataset.cpp)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="a checkpoint-<step>.safetensors file written by Liftoff")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=1000)
    args = p.parse_args()

    with safe_open(args.checkpoint, framework="pt") as f:
        meta = f.metadata() or {}
    fmt = meta.get("liftoff.format")
    if fmt not in ("liftoff-checkpoint-1", "liftoff-checkpoint-2", "liftoff-checkpoint-3"):
        sys.exit(f"{args.checkpoint}: not a Liftoff checkpoint (liftoff.format = {meta.get('liftoff.format')!r})")
    name = meta.get("liftoff.model", "")
    if not name.startswith("resnet"):
        sys.exit(f"{args.checkpoint}: model {name!r}; this script rebuilds the CIFAR ResNets (resnet20/32/44/56)")

    tensors = load_file(args.checkpoint)
    if fmt == "liftoff-checkpoint-3":  # PyTorch's names as they are; the other sections hold a "/"
        state = {k: v for k, v in tensors.items() if "/" not in k}
    else:
        state = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    model = resnet(int(name[len("resnet"):]), in_channels=state["conv1.weight"].shape[1],
                   classes=state["fc.weight"].shape[0])
    model.load_state_dict(state, strict=True)  # every key, every shape: Liftoff's names are PyTorch's
    model.to(args.device).eval()

    images = torch.from_numpy(read_idx(f"{args.data_dir}/t10k-images-idx3-ubyte.gz").copy()).unsqueeze(1)
    labels = torch.from_numpy(read_idx(f"{args.data_dir}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    correct = 0
    with torch.no_grad():
        for i in range(0, len(images), args.batch):
            x = (images[i:i + args.batch].to(args.device).float() / 255 - MEAN) / STD
            correct += (model(x).argmax(1).cpu() == labels[i:i + args.batch]).sum().item()
    accuracy = correct / len(images)
    print(f"{args.checkpoint}: {name} at step {meta.get('liftoff.step')}, test accuracy {100 * accuracy:.2f}% "
          f"on {len(images)} Fashion-MNIST images")
    print(f"RESULT accuracy={accuracy:.4f} images={len(images)} step={meta.get('liftoff.step')} model={name}")


if __name__ == "__main__":
    main()
