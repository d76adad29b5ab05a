#!/usr/bin/env python3
"""PyTorch's best equivalent of `train --target-accuracy`: time to a test accuracy on Fashion-MNIST with the
recipe Liftoff runs (never used at run time; scripts/device_stage_tta.sh runs both in one call).

Same model (tools/reference/resnet_cifar.py; resnet18/resnet50 as model_panel.py builds them), data on the GPU with the same augmentation (random crop with
zero padding + horizontal flip + normalize), SGD Nesterov momentum 0.9 + weight decay, OneCycleLR over all
epochs with momentum held (Liftoff's onecycle does not cycle it), label smoothing, the LR scaled with the batch
(--lr-scale, reference batch 256), and PyTorch's fast paths: cudnn.benchmark, autocast bf16, channels_last.
Options Liftoff has: EMA of the weights (torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn: one
fused _foreach_lerp_ per step; --ema-buffers copy keeps the model's batch-norm statistics, average averages
them too, use_buffers=True), flip averaging at evaluation (logits of image and mirror averaged), shift averaging
(--tta-shift: the image 1/2, its one-pixel shifts down-right and up-left, edges replicated, 1/4 each).

Evaluates after every epoch (--eval-every N: every N-th and the last) and stops at the first that reaches the target. Prints per epoch, then one line:
  RESULT accuracy=<a> epochs=<n> wall_s=<s> train_s=<s> target=<t> reached=<0|1>
wall_s: from the first step, data loading (augmentation) and evaluation included (Liftoff's wall figure);
train_s: the epochs' training time alone (device synchronised at each epoch end, evaluation left out).
Example:
  python3 tools/reference/time_to_accuracy.py --data-dir .devrun/data --batch 512 --epochs 12 --lr 0.2 \\
    --lr-scale linear --ema 0.99 --tta-flip --target-accuracy 94 --seed 1
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet_cifar import ResNet9, resnet  # noqa: E402
from train_reference import MEAN, STD, augment, read_idx  # noqa: E402


def load(data_dir, dev):
    def images(name):
        return torch.from_numpy(read_idx(f"{data_dir}/{name}").copy()).unsqueeze(1).to(dev)

    def labels(name):
        return torch.from_numpy(read_idx(f"{data_dir}/{name}").astype("int64")).to(dev)

    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


def effective_lr(lr, scale, images_per_step):
    ratio = images_per_step / 256.0
    return lr * (ratio if scale == "linear" else math.sqrt(ratio) if scale == "sqrt" else 1.0)


def make_ema(model, decay, average_buffers):
    """AveragedModel with PyTorch's fused EMA (falls back to the same update by hand on older versions)."""
    from torch.optim import swa_utils
    if hasattr(swa_utils, "get_ema_multi_avg_fn"):
        return swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(decay),
                                       use_buffers=average_buffers)
    return swa_utils.AveragedModel(model, avg_fn=lambda avg, cur, n: decay * avg + (1 - decay) * cur,
                                   use_buffers=average_buffers)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--model", default="resnet20")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--lr-scale", default="none", choices=["linear", "sqrt", "none"])
    p.add_argument("--wd", type=float, default=5e-4)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--pad", type=int, default=2)
    p.add_argument("--amp", default="bf16", choices=["off", "bf16"])
    p.add_argument("--no-channels-last", action="store_true")
    p.add_argument("--ema", type=float, default=-1.0, help="EMA decay (< 0: off)")
    p.add_argument("--ema-buffers", default="copy", choices=["copy", "average"])
    p.add_argument("--tta-flip", action="store_true")
    p.add_argument("--tta-shift", action="store_true",
                   help="also the image moved one pixel down-right and up-left (edges replicated): 1/2, 1/4, 1/4")
    p.add_argument("--eval-every", type=int, default=1, help="evaluate after every N-th epoch and the last")
    p.add_argument("--drop-last", action="store_true", help="drop each epoch's last, smaller batch")
    p.add_argument("--target-accuracy", type=float, default=94.0, help="0..1 or a percentage")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.eval_every < 1:
        p.error(f"--eval-every must be >= 1, got {args.eval_every}")
    target = args.target_accuracy / 100.0 if args.target_accuracy > 1.0 else args.target_accuracy

    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    tr_x, tr_y, te_x, te_y = load(args.data_dir, dev)
    mf = torch.contiguous_format if args.no_channels_last else torch.channels_last
    if args.model in ("resnet18", "resnet50"):  # the panel's twins (CIFAR stem at 28 px), as Liftoff's zoo
        import model_panel
        model = model_panel.make_model(args.model, 1, 10, 28)
    elif args.model == "resnet9":
        model = ResNet9(1, 10)
    else:
        model = resnet(int(args.model.replace("resnet", "")), 1, 10)
    model = model.to(dev).to(memory_format=mf)
    lr = effective_lr(args.lr, args.lr_scale, args.batch)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=args.wd)
    n = len(tr_x)
    steps_per_epoch = n // args.batch if args.drop_last else (n + args.batch - 1) // args.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps_per_epoch * args.epochs,
                                                cycle_momentum=False)
    ema = make_ema(model, args.ema, args.ema_buffers == "average") if args.ema >= 0 else None
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    amp_dtype = torch.bfloat16 if args.amp == "bf16" else None
    te_in = ((te_x.float() / 255 - MEAN) / STD).contiguous(memory_format=mf)

    def view(net, x):  # one test-time view's logits, averaged with its mirror's under --tta-flip
        logits = net(x).float()
        return 0.5 * (logits + net(x.flip(3)).float()) if args.tta_flip else logits

    def evaluate():
        net = ema.module if ema is not None else model
        if ema is not None and args.ema_buffers == "copy":
            for b_ema, b in zip(ema.module.buffers(), model.buffers()):
                b_ema.copy_(b)
        net.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
            for i in range(0, len(te_in), 1000):
                x = te_in[i:i + 1000]
                logits = view(net, x)
                if args.tta_shift:
                    wide = F.pad(x, (1, 1, 1, 1), mode="replicate")
                    logits = 0.5 * logits + 0.25 * (view(net, wide[:, :, :-2, :-2]) + view(net, wide[:, :, 2:, 2:]))
                correct += (logits.argmax(1) == te_y[i:i + 1000]).sum()
        net.train()
        return correct.item() / len(te_in)  # .item() synchronises

    model.train()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    train_s = 0.0
    accuracy = 0.0
    for epoch in range(args.epochs):
        e0 = time.perf_counter()
        perm = torch.randperm(n, device=dev, generator=gen)
        for s in range(steps_per_epoch):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            x = augment(tr_x[idx], args.pad, gen).contiguous(memory_format=mf)
            with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), tr_y[idx], label_smoothing=args.label_smoothing)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            if ema is not None:
                ema.update_parameters(model)
        torch.cuda.synchronize()
        train_s += time.perf_counter() - e0
        if (epoch + 1) % args.eval_every != 0 and epoch + 1 != args.epochs:
            continue
        accuracy = evaluate()
        wall = time.perf_counter() - t0
        print(f"epoch {epoch + 1}/{args.epochs}: accuracy {100 * accuracy:.2f}% (wall {wall:.2f} s, "
              f"training {train_s:.2f} s)", flush=True)
        if accuracy >= target:
            print(f"RESULT accuracy={accuracy:.4f} epochs={epoch + 1} wall_s={wall:.3f} train_s={train_s:.3f} "
                  f"target={target} reached=1")
            return
    print(f"RESULT accuracy={accuracy:.4f} epochs={args.epochs} wall_s={time.perf_counter() - t0:.3f} "
          f"train_s={train_s:.3f} target={target} reached=0")


if __name__ == "__main__":
    main()
