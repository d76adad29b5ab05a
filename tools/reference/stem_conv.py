#!/usr/bin/env python3
"""A CNN's first convolution (few input channels), channels-last on cuDNN as PyTorch runs it (--dtype, fp32 by
default, TF32 as PyTorch's default for convolutions), with the input channels as given and zero-padded to 4 and 8:
median forward and weight-gradient times (CUDA events over --reps calls after a warm-up; cudnn.benchmark), and the
kernels each ran (profiler). Tells whether padding a 3-channel stem lets cuDNN's tensor-core engines take it.
  python3 tools/reference/stem_conv.py --batch 512 --size 32 --out-channels 64
"""
import argparse
import statistics

import torch
import torch.nn.functional as F


def timed(fn, reps):
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--out-channels", type=int, default=64)
    p.add_argument("--kernel", type=int, default=3)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    a = p.parse_args()
    torch.backends.cudnn.benchmark = True
    dtype = getattr(torch, a.dtype)
    for channels in (a.in_channels, 4, 8):
        x = torch.randn(a.batch, channels, a.size, a.size, device="cuda", dtype=dtype).to(
            memory_format=torch.channels_last)
        w = torch.randn(a.out_channels, channels, a.kernel, a.kernel, device="cuda", dtype=dtype).to(
            memory_format=torch.channels_last)
        gy = torch.randn(a.batch, a.out_channels, a.size, a.size, device="cuda", dtype=dtype).to(
            memory_format=torch.channels_last)
        pad = a.kernel // 2
        fwd = lambda: F.conv2d(x, w, padding=pad)
        wgrad = lambda: torch.ops.aten.convolution_backward(gy, x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0],
                                                              1, [False, True, False])
        for _ in range(5):
            fwd(), wgrad()
        t_fwd, t_wgrad = timed(fwd, a.reps), timed(wgrad, a.reps)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fwd(), wgrad()
            torch.cuda.synchronize()
        names = [e.name[:70] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        print(f"RESULT dtype={a.dtype} channels={channels} batch={a.batch} size={a.size} forward_us={t_fwd:.1f} "
              f"weight_grad_us={t_wgrad:.1f} kernels={' | '.join(names)}")


if __name__ == "__main__":
    main()
