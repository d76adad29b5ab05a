#!/usr/bin/python3
"""Golden values for tests/models/golden_test.cpp: one training-mode forward/backward of ResNet-20 in PyTorch.

Run with Debian's python3-torch (torch 1.13, CPU):
    /usr/bin/python3 tools/reference/golden_resnet20.py [--out tests/models/nn/data/golden_resnet20.bin]

The model is He et al. 2016's CIFAR ResNet-20 with projection shortcuts (1x1 conv stride 2 + BN), built with
the module names liftoff's models/nn/zoo.h uses. Input: 4 random 1x28x28 images, 10 classes, label smoothing 0.1.

File format (little-endian): b"LFGD", u32 version (1), u32 tensor count, then per tensor:
u32 name length, name bytes (UTF-8), u32 dtype code (0 = f32, 1 = i64, 2 = f64), u32 ndim, i64 dims[ndim],
raw data.
Tensors: "param.<name>" and "buffer.<name>" (the state before the forward), "input", "labels", "logits",
"loss", "grad.<name>" for every parameter, and "after.<name>" for every buffer after the forward.
"""
import argparse
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


# The model itself: tools/reference/resnet_cifar.py (module names as Liftoff's models/nn/zoo.h).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet_cifar import ResNet  # noqa: E402


def write(path, tensors):
    codes = {torch.float32: (0, "<f4"), torch.int64: (1, "<i8"), torch.float64: (2, "<f8")}
    with open(path, "wb") as f:
        f.write(b"LFGD")
        f.write(struct.pack("<II", 1, len(tensors)))
        for name, t in tensors:
            t = t.detach().contiguous().cpu()
            encoded = name.encode("utf-8")
            f.write(struct.pack("<I", len(encoded)))
            f.write(encoded)
            code, layout = codes[t.dtype]
            f.write(struct.pack("<II", code, t.dim()))
            f.write(struct.pack("<%dq" % t.dim(), *t.shape))
            f.write(t.numpy().astype(layout).tobytes())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "..", "tests", "models", "nn", "data", "golden_resnet20.bin")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.normpath(default_out))
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = ResNet(3, 1, 10)
    # Move batch-norm away from its trivial initial state so the affine terms and the running-statistics update
    # are really tested (weight 1 / bias 0 / mean 0 / var 1 would hide swapped or dropped terms).
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(3)
    assert sum(p.numel() for p in ResNet(3, 3, 10).parameters()) == 272474

    tensors = []
    params = dict(model.named_parameters())
    for name, t in model.state_dict().items():
        tensors.append((("param." if name in params else "buffer.") + name, t.clone()))

    x = torch.randn(4, 1, 28, 28)
    y = torch.randint(0, 10, (4,))
    model.train()
    logits = model(x)
    loss = F.cross_entropy(logits, y, label_smoothing=0.1)
    loss.backward()

    tensors += [("input", x), ("labels", y), ("logits", logits), ("loss", loss)]
    tensors += [("grad." + name, p.grad) for name, p in model.named_parameters()]
    tensors += [("after." + name, b) for name, b in model.named_buffers()]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    write(args.out, tensors)
    print("wrote %d tensors to %s; loss %.6f, resnet20 (3 in, 10 classes) has 272474 parameters"
          % (len(tensors), args.out, loss.item()))


if __name__ == "__main__":
    main()
