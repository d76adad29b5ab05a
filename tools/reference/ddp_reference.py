#!/usr/bin/env python3
"""PyTorch DDP reference for `train --gpus N`: same model (tools/reference/resnet_cifar.py), per-GPU batch,
accumulation, precision and bucket size, so images/s can be compared side by side. Never used at run time.

Launch with torchrun (one process per GPU):
  torchrun --standalone --nproc_per_node 2 tools/reference/ddp_reference.py --model resnet20 --batch 128 \
      --amp off --bucket-mb 25 --steps 200
Input is a fixed synthetic batch already on the GPU (1x28x28, 10 classes), so the figure is the training step
(forward, backward, all-reduce, optimizer), not the input pipeline. Liftoff's side: `train --data synthetic`
reports steady-state images/s after its timing warm-up; compare with --workers high enough to be compute-bound.

Prints on rank 0:  RESULT images_per_s=<global> step_ms=<mean> world=<n> model=<m> batch=<per gpu> accum=<k>
amp=<mode> bucket_mb=<mb>
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet_cifar import resnet  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet20", help="resnet20|resnet32|resnet44|resnet56")
    p.add_argument("--batch", type=int, default=128, help="per GPU, as train --batch")
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"])
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--wd", type=float, default=5e-4)
    p.add_argument("--steps", type=int, default=200, help="timed optimizer steps")
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)

    depth = int(args.model.replace("resnet", ""))
    mf = torch.channels_last if args.channels_last else torch.contiguous_format
    model = resnet(depth, in_channels=1, classes=10).cuda().to(memory_format=mf)
    # Liftoff broadcasts buffers only at start (and before evaluation): match that.
    ddp = DDP(model, device_ids=[local_rank], bucket_cap_mb=args.bucket_mb, broadcast_buffers=False,
              gradient_as_bucket_view=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=args.wd)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp == "fp16")

    g = torch.Generator(device="cuda").manual_seed(args.seed + rank)
    x = torch.randn(args.batch, 1, 28, 28, device="cuda", generator=g).to(memory_format=mf)
    y = torch.randint(0, 10, (args.batch,), device="cuda", generator=g)

    def step():
        for m in range(args.accum):
            last = m == args.accum - 1
            ctx = ddp.no_sync() if not last else _null()
            with ctx, torch.autocast("cuda", dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
                loss = F.cross_entropy(ddp(x), y) / args.accum
            scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup_steps):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if rank == 0:
        images = args.steps * args.accum * args.batch * world
        print(f"RESULT images_per_s={images / seconds:.1f} step_ms={1000 * seconds / args.steps:.3f} world={world} "
              f"model={args.model} batch={args.batch} accum={args.accum} amp={args.amp} bucket_mb={args.bucket_mb}")
    dist.destroy_process_group()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
