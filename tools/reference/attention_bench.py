#!/usr/bin/env python3
"""PyTorch twin of tools/bench/attention_bench: torch.nn.functional.scaled_dot_product_attention (forward,
forward+backward) and torch.bmm at the same shapes, dtype and row names, timed the same way: 3 warm-up calls,
then `rounds` timings of `reps` calls between two CUDA events on the current stream; the median per call is
printed (ms). PyTorch picks its SDPA backend itself (flash attention for bf16/f16 at these head dims).
  python3 tools/reference/attention_bench.py [--dtype bf16|f16] [--reps 20] [--rounds 7] [--only NAME]
  python3 tools/reference/attention_bench.py --device cpu --reps 1 --rounds 1 --only L65   (a syntax check)
"""
import argparse

import torch
import torch.nn.functional as F


def median_ms(fn, device, reps, rounds):
    for _ in range(3):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    times = []
    for _ in range(rounds):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / reps)
        else:
            import time
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            times.append((time.perf_counter() - t0) * 1e3 / reps)
    times.sort()
    return times[len(times) // 2]


def leaves(shapes, dtype, device, gen):
    return [torch.randn(s, generator=gen, device="cpu").to(device=device, dtype=dtype).requires_grad_()
            for s in shapes]


def attention_row(b, h, l, d, causal, dtype, device, gen):
    q, k, v = leaves([(b, h, l, d)] * 3, dtype, device, gen)
    grad = torch.randn((b, h, l, d), generator=gen).to(device=device, dtype=dtype)

    def forward():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def forward_backward():
        q.grad = k.grad = v.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(grad)

    name = f"sdpa_B{b}_H{h}_L{l}_D{d}" + ("_causal" if causal else "")
    return name, forward, forward_backward


def matmul_row(batch, m, k, n, dtype, device, gen):
    a, b = leaves([(batch, m, k), (batch, k, n)], dtype, device, gen)
    grad = torch.randn((batch, m, n), generator=gen).to(device=device, dtype=dtype)

    def forward():
        with torch.no_grad():
            torch.bmm(a, b)

    def forward_backward():
        a.grad = b.grad = None
        torch.bmm(a, b).backward(grad)

    return f"bmm_{batch}x{m}x{k}x{n}", forward, forward_backward


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(1)
    rows = [
        lambda: attention_row(128, 3, 65, 64, False, dtype, device, gen),
        lambda: attention_row(32, 12, 197, 64, False, dtype, device, gen),
        lambda: attention_row(8, 16, 1024, 64, False, dtype, device, gen),
        lambda: attention_row(8, 16, 1024, 64, True, dtype, device, gen),
        lambda: attention_row(4, 16, 4096, 128, True, dtype, device, gen),
        lambda: matmul_row(384, 65, 64, 65, dtype, device, gen),
        lambda: matmul_row(384, 197, 64, 197, dtype, device, gen),
        lambda: matmul_row(128, 1024, 1024, 64, dtype, device, gen),
        lambda: matmul_row(16, 1024, 4096, 1024, dtype, device, gen),
    ]
    print(f"{'case':<36} {'fwd_ms':>12} {'fwd_bwd_ms':>12}", flush=True)
    for make in rows:
        name, forward, forward_backward = make()
        if args.only and args.only not in name:
            continue
        fwd = median_ms(forward, device, args.reps, args.rounds)
        both = median_ms(forward_backward, device, args.reps, args.rounds)
        print(f"{name:<36} {fwd:12.4f} {both:12.4f}", flush=True)


if __name__ == "__main__":
    main()
