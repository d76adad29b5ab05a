#!/usr/bin/env python3
"""PyTorch twin of Liftoff's `train`, for side-by-side speed and accuracy comparisons (never used at run time).

Same model (tools/reference/resnet_cifar.py), data (Fashion-MNIST IDX .gz or synthetic), augmentation (random
crop with zero padding + horizontal flip + normalize, done on the same device as Liftoff's --augment), optimizer
(SGD Nesterov momentum / AdamW), one-cycle schedule, label smoothing, gradient accumulation (loss / K).
PyTorch's best settings are on by default: cudnn.benchmark; --channels-last and --amp as asked.

Prints one machine-readable line at the end:  RESULT images_per_s=<x> steps=<n> seconds=<s> [accuracy=<a>]
Examples:
  /usr/bin/python3 tools/reference/train_reference.py --device cpu --threads 2 --batch 128 --steps 30
  python3 tools/reference/train_reference.py --device cuda --batch 16 --accum 4 --steps 200
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet_cifar import resnet  # noqa: E402

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(args):
    if args.data == "synthetic":
        g = torch.Generator().manual_seed(1)
        n = args.synthetic_size
        return (torch.randint(0, 256, (n, 1, 28, 28), dtype=torch.uint8, generator=g),
                torch.randint(0, 10, (n,), generator=g),
                torch.randint(0, 256, (n // 6, 1, 28, 28), dtype=torch.uint8, generator=g),
                torch.randint(0, 10, (n // 6,), generator=g))
    d = args.data_dir
    tr_x = torch.from_numpy(read_idx(f"{d}/train-images-idx3-ubyte.gz").copy()).unsqueeze(1)
    tr_y = torch.from_numpy(read_idx(f"{d}/train-labels-idx1-ubyte.gz").astype(np.int64))
    te_x = torch.from_numpy(read_idx(f"{d}/t10k-images-idx3-ubyte.gz").copy()).unsqueeze(1)
    te_y = torch.from_numpy(read_idx(f"{d}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    return tr_x, tr_y, te_x, te_y


def augment(x_u8, pad, gen):
    """Random crop with zero padding + horizontal flip + normalize, vectorised over the batch."""
    b, c, h, w = x_u8.shape
    x = x_u8.float().div_(255)
    if pad > 0:
        x = F.pad(x, (pad, pad, pad, pad))
        dx = torch.randint(0, 2 * pad + 1, (b,), generator=gen, device=gen.device)
        dy = torch.randint(0, 2 * pad + 1, (b,), generator=gen, device=gen.device)
        rows = (dy[:, None] + torch.arange(h, device=x.device)[None, :])  # b x h
        cols = (dx[:, None] + torch.arange(w, device=x.device)[None, :])  # b x w
        x = x[torch.arange(b, device=x.device)[:, None, None, None], torch.arange(c, device=x.device)[None, :, None, None],
              rows[:, None, :, None], cols[:, None, None, :]]
    flip = torch.rand(b, generator=gen, device=gen.device) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    return (x - MEAN) / STD


def graphed_step(args, model, opt, batches, amp_dtype):
    """PyTorch's whole-network CUDA graph recipe (torch.cuda.graphs docs): warm up on a side stream, capture
    forward + backward of every micro-batch and opt.step() once with gradients set to None, then each step
    copies its micro-batches into the static inputs and replays. SGD's step cannot read a tensor learning rate
    inside a graph without a host sync, so the graph keeps the rate it was captured with: the work per step is
    the same as with the schedule."""
    static = [tuple(t.clone() for t in next(batches)) for _ in range(args.accum)]

    def body():
        for x, y in static:
            with torch.autocast(device_type="cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y, label_smoothing=args.label_smoothing) / args.accum
            loss.backward()
        opt.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        body()

    def step():
        for sx, sy in static:
            x, y = next(batches)
            sx.copy_(x, non_blocking=True)
            sy.copy_(y, non_blocking=True)
        graph.replay()

    return step


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--model", default="resnet20")
    p.add_argument("--data", default="fashion-mnist", choices=["fashion-mnist", "synthetic"])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--synthetic-size", type=int, default=10000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--wd", type=float, default=5e-4)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="timed optimizer steps (0: whole epochs, with evaluation)")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--augment", default="same", choices=["same", "cpu", "none"],
                   help="where to augment: same = on --device")
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"])
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--cuda-graph", action="store_true",
                   help="timed steps (--steps) as one captured torch.cuda.CUDAGraph per optimizer step "
                        "(PyTorch's whole-network capture recipe); --amp off or bf16")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target-accuracy", type=float, default=0.0,
                   help="evaluate after every epoch and stop at the first that reaches this (0..1); prints the "
                        "time to it, data loading and evaluation included (Liftoff: train --target-accuracy)")
    args = p.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
    tr_x, tr_y, te_x, te_y = load(args)
    model = resnet(int(args.model.replace("resnet", "")), 1, 10).to(dev)
    mf = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=mf)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=args.wd)
    micro_per_epoch = (len(tr_x) + args.batch - 1) // args.batch
    steps_per_epoch = (micro_per_epoch + args.accum - 1) // args.accum
    total_steps = args.steps + args.warmup_steps if args.steps > 0 else steps_per_epoch * args.epochs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total_steps)
    aug_dev = dev if args.augment == "same" else torch.device("cpu")
    gen = torch.Generator(device=aug_dev).manual_seed(args.seed)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp == "fp16")
    if dev.type == "cuda" and aug_dev.type == "cuda":
        tr_x, tr_y = tr_x.to(dev), tr_y.to(dev)

    def micro_batches():
        epoch = 0
        while True:
            perm = torch.randperm(len(tr_x), device=tr_x.device)
            for i in range(0, len(tr_x), args.batch):
                idx = perm[i:i + args.batch]
                x = tr_x[idx].to(aug_dev, non_blocking=True)
                x = augment(x, 2, gen) if args.augment != "none" else (x.float() / 255 - MEAN) / STD
                yield x.to(dev, non_blocking=True).contiguous(memory_format=mf), tr_y[idx].to(dev, non_blocking=True)
            epoch += 1

    batches = micro_batches()

    def step():
        for _ in range(args.accum):
            x, y = next(batches)
            with torch.autocast(device_type=dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y, label_smoothing=args.label_smoothing) / args.accum
            scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        sched.step()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    model.train()
    if args.cuda_graph:
        if args.steps <= 0 or dev.type != "cuda" or args.amp == "fp16":
            raise SystemExit("--cuda-graph needs --steps > 0, --device cuda and --amp off or bf16 "
                             "(GradScaler reads found_inf on the host)")
        step = graphed_step(args, model, opt, batches, amp_dtype)

    if args.steps > 0:
        for _ in range(args.warmup_steps):
            step()
        sync()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        secs = time.perf_counter() - t0
        ips = args.steps * args.accum * args.batch / secs
        print(f"RESULT images_per_s={ips:.1f} steps={args.steps} seconds={secs:.3f}")
        return

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(te_x), 1000):
                x = ((te_x[i:i + 1000].to(dev).float() / 255 - MEAN) / STD).contiguous(memory_format=mf)
                correct += (model(x).argmax(1).cpu() == te_y[i:i + 1000]).sum().item()
        model.train()
        return correct / len(te_x)

    if args.target_accuracy > 0:
        # Same schedule as the full run (OneCycle over all epochs); stops at the first epoch reaching the target.
        t0 = time.perf_counter()
        accuracy = 0.0
        for epoch in range(args.epochs):
            for _ in range(steps_per_epoch):
                step()
            accuracy = evaluate()  # .item() synchronises: the wall time covers the device work
            print(f"epoch {epoch + 1}/{args.epochs}: accuracy {100 * accuracy:.2f}% "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
            if accuracy >= args.target_accuracy:
                print(f"RESULT time_to_accuracy={time.perf_counter() - t0:.3f} epochs={epoch + 1} "
                      f"accuracy={accuracy:.4f} target={args.target_accuracy}")
                return
        print(f"RESULT time_to_accuracy=none epochs={args.epochs} accuracy={accuracy:.4f} "
              f"target={args.target_accuracy} seconds={time.perf_counter() - t0:.3f}")
        return

    t0 = time.perf_counter()
    for _ in range(total_steps):
        step()
    sync()
    train_secs = time.perf_counter() - t0
    accuracy = evaluate()
    total = time.perf_counter() - t0
    ips = total_steps * args.accum * args.batch / train_secs
    print(f"RESULT images_per_s={ips:.1f} steps={total_steps} seconds={total:.3f} accuracy={accuracy:.4f}")


if __name__ == "__main__":
    main()
