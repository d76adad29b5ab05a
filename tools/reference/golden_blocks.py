#!/usr/bin/python3
"""Golden values for tests/models/nn/golden_blocks_test.cpp: one training-mode forward/backward of a transformer
encoder block and of MobileNetV2 inverted-residual blocks in PyTorch, in f64.

Run with Debian's python3-torch (torch 1.13, CPU):
    /usr/bin/python3 tools/reference/golden_blocks.py [--out-dir tests/models/nn/data]

f64, unlike golden_resnet20.bin's f32: the blocks are tiny, so the files stay small (about 40 KB each), and in
f64 both sides round far below any semantic difference, so the CPU test can demand agreement to 1e-10 and a
wrong term cannot hide inside rounding noise. The CUDA test compares its f32 run with the same f64 values.

Dumps (the file format is golden_resnet20.py's, dtype code 2 = f64):
  golden_transformer_prenorm.bin   nn.TransformerEncoderLayer(16, 4, 32, dropout=0, activation="gelu",
                                   batch_first=True, norm_first=True): the block Liftoff's vit_tiny stacks.
  golden_transformer_postnorm.bin  the same with PyTorch's defaults activation="relu", norm_first=False.
  golden_mobilenet_blocks.bin      nn.Sequential(InvertedResidual(8, 8, 2, 6), InvertedResidual(8, 8, 1, 6)) as
                                   torchvision's mobilenetv2 and Liftoff's models/nn/mobilenet.h build them
                                   (the twin is model_panel.py's, the panel's mobilenet_v2 is made of it):
                                   expand 1x1 conv + BN + ReLU6, depthwise 3x3 + BN + ReLU6, project 1x1 + BN,
                                   residual when stride 1 and in == out. The residual block comes last: a block
                                   followed by a 1x1 conv and a training-mode BN would give its last BN bias a
                                   gradient that is exactly zero (rounding noise on both sides, nothing to test).
Each holds "param.<name>" and "buffer.<name>" (the state before, state_dict order), "input", "output",
"loss_weight" (a fixed random tensor of the output's shape), "loss" (sum(output * loss_weight)), "grad.<name>"
for every parameter, "grad.input", and "after.<name>" for every buffer after the training-mode forward.
Parameter names are PyTorch's, which Liftoff's layers use, so weights map 1:1.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_resnet20 import write  # noqa: E402  (the LFGD writer)
from model_panel import InvertedResidual  # noqa: E402  (the zoo's twins)


def perturb(model):
    """Moves the terms whose default is trivial (norm weight 1 / bias 0, zero attention biases, running mean 0 /
    var 1) away from it, so swapped or dropped terms cannot pass."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(3)
            if isinstance(m, nn.MultiheadAttention):
                m.in_proj_bias.uniform_(-0.2, 0.2)
                m.out_proj.bias.uniform_(-0.2, 0.2)


def dump(model, x, path):
    perturb(model)
    params = dict(model.named_parameters())
    tensors = [(("param." if name in params else "buffer.") + name, t.clone())
               for name, t in model.state_dict().items()]
    model.train()
    x = x.clone().requires_grad_(True)
    output = model(x)
    loss_weight = torch.randn(output.shape)
    loss = (output * loss_weight).sum()
    loss.backward()
    tensors += [("input", x), ("output", output), ("loss_weight", loss_weight), ("loss", loss)]
    tensors += [("grad." + name, p.grad) for name, p in model.named_parameters()]
    tensors += [("grad.input", x.grad)]
    tensors += [("after." + name, b) for name, b in model.named_buffers()]
    write(path, tensors)
    print("wrote %d tensors (%d parameters) to %s; loss %.12f"
          % (len(tensors), sum(p.numel() for p in model.parameters()), path, loss.item()))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.normpath(os.path.join(here, "..", "..", "tests", "models",
                                                                           "nn", "data")))
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)

    # d_model 16, 4 heads of 4, feed-forward 32; a batch of 2 sequences of 5 tokens.
    for name, activation, norm_first in (("prenorm", "gelu", True), ("postnorm", "relu", False)):
        torch.manual_seed(0)
        block = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, activation=activation, batch_first=True,
                                           norm_first=norm_first)
        dump(block, torch.randn(2, 5, 16), os.path.join(args.out_dir, "golden_transformer_%s.bin" % name))

    torch.manual_seed(0)
    blocks = nn.Sequential(InvertedResidual(8, 8, 2, 6), InvertedResidual(8, 8, 1, 6))
    dump(blocks, torch.randn(2, 8, 8, 8), os.path.join(args.out_dir, "golden_mobilenet_blocks.bin"))


if __name__ == "__main__":
    main()
