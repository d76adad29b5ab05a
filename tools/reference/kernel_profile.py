#!/usr/bin/env python3
"""Runs the PyTorch twin of tools/bench/model_panel (tools/reference/model_panel.py's models, eager, PyTorch's
best settings: cudnn.benchmark, channels_last (the panel's best format for the conv nets in fp32 and bf16;
--memory-format contiguous for NCHW), autocast for bf16) and brackets a few steps with
cudaProfilerStart/Stop, so `ncu --profile-from-start off` sees exactly those steps' kernels:
  ncu --profile-from-start off --metrics gpu__time_duration.sum --csv python3 tools/reference/kernel_profile.py \
      --model resnet18 --image-size 32 --batch 512 --amp bf16 --profile-steps 2
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_panel import add_model_args, make_model  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--profile-steps", type=int, default=2)
    p.add_argument("--memory-format", default="channels_last", choices=["channels_last", "contiguous"])
    a = p.parse_args()
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    fmt = torch.channels_last if a.memory_format == "channels_last" else torch.contiguous_format
    model = make_model(a.model, a.channels, a.classes, a.image_size).to(dev).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    amp = torch.bfloat16 if a.amp == "bf16" else None
    x = torch.randn(a.batch, a.channels, a.image_size, a.image_size, device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(a.profile_steps):
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
