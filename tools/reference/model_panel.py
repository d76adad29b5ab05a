#!/usr/bin/env python3
"""PyTorch twin of tools/bench/model_panel: the same models (as Liftoff's zoo builds them from public layers), batch,
precision and optimizer (SGD momentum 0.9 Nesterov, wd 5e-4), random inputs already on the GPU; PyTorch at its
best: cudnn.benchmark, autocast for bf16, channels_last or NCHW (--memory-format; `both` times each, the panel
takes the faster), eager and whole-step CUDA graph (--mode graph; --mode both runs the two in one process).
Throughput: images between two torch.cuda.synchronize() marks over wall time. Models: resnet18, resnet50,
strided_cnn, mobilenet_v2, vit_tiny, vgg11, each with the parameter count Liftoff's make_model prints (params=).
  python3 tools/reference/model_panel.py --model resnet18 --image-size 32 --batch 128 --amp bf16 --mode graph
  python3 tools/reference/model_panel.py --model vit_tiny --device cpu --amp off --batch 2 --steps 1 --warmup 0
(--device cpu: to check a twin where no GPU is, e.g. its params= against model_panel --device cpu.)
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + self.shortcut(x))


class ResNet(nn.Module):
    """resnet18 (BasicBlock 2-2-2-2) / resnet50 (Bottleneck 3-4-6-3); CIFAR stem (3x3 stride 1, no max pool) below
    64 px, ImageNet stem (7x7 stride 2 + 3x3 max pool) from 64 px."""

    def __init__(self, block, layers, cin, classes, image_size):
        super().__init__()
        self.imagenet_stem = image_size >= 64
        if self.imagenet_stem:
            self.conv1 = nn.Conv2d(cin, 64, 7, 2, 3, bias=False)
        else:
            self.conv1 = nn.Conv2d(cin, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        blocks, c = [], 64
        for i, (n, w) in enumerate(zip(layers, [64, 128, 256, 512])):
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(block(c, w, stride))
                c = w * (4 if block is Bottleneck else 1)
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        if self.imagenet_stem:
            y = F.max_pool2d(y, 3, 2, 1)
        y = self.layers(y)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class StridedCNN(nn.Module):
    def __init__(self, cin, classes):
        super().__init__()
        layers, c = [], cin
        for out in (16, 32, 64):
            layers += [nn.Conv2d(c, out, 3, 2, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            c = out
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def conv_bn_relu6(cin, cout, kernel, stride, groups):
    """torchvision's Conv2dNormActivation(cin, cout, kernel, stride, groups, activation_layer=nn.ReLU6)."""
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6())


class InvertedResidual(nn.Module):
    """torchvision.models.mobilenetv2.InvertedResidual (same submodule names): [expand 1x1 conv + BN + ReLU6 when
    expand_ratio != 1], depthwise 3x3 + BN + ReLU6, project 1x1 + BN; x + conv(x) when stride 1 and in == out."""

    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        hidden = inp * expand_ratio
        self.use_res_connect = stride == 1 and inp == oup
        layers = [conv_bn_relu6(inp, hidden, 1, 1, 1)] if expand_ratio != 1 else []
        layers += [conv_bn_relu6(hidden, hidden, 3, stride, hidden), nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
                   nn.BatchNorm2d(oup)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """Liftoff's models/nn/mobilenet.h (torchvision's MobileNetV2 at width 1.0 and its names): stem stride 1 below
    64 px (the CIFAR adaptation), 2 from 64 px; classifier Dropout(0.2) + Linear(1280, classes)."""

    def __init__(self, cin, classes, image_size):
        super().__init__()
        stages = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                  (6, 320, 1, 1)]
        layers, c = [conv_bn_relu6(cin, 32, 3, 1 if image_size < 64 else 2, 1)], 32
        for t, out, n, s in stages:
            for i in range(n):
                layers.append(InvertedResidual(c, out, s if i == 0 else 1, t))
                c = out
        layers.append(conv_bn_relu6(c, 1280, 1, 1, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class VisionTransformer(nn.Module):
    """Liftoff's models/nn/vit.h (same names and registration order): patch-embedding conv, class token, learned
    positions, depth pre-norm GELU encoder layers without dropout, final LayerNorm, head on the class token."""

    def __init__(self, cin, classes, image_size, patch, dim, depth, heads, mlp_dim):
        super().__init__()
        tokens = (image_size // patch) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.conv_proj = nn.Conv2d(cin, dim, patch, patch)
        self.encoder = nn.Sequential(*[
            nn.TransformerEncoderLayer(dim, heads, mlp_dim, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        y = self.conv_proj(x).flatten(2).transpose(1, 2)
        y = torch.cat([self.class_token.expand(x.shape[0], -1, -1), y], 1)
        y = self.encoder(y + self.pos_embedding)
        return self.head(self.norm(y)[:, 0])


class VGG11(nn.Module):
    """torchvision's vgg11 features (no batch norm: 3x3 convolutions with a bias, each followed by a ReLU), then a
    global average pool and Linear(512, classes), as Liftoff's models/nn/vgg.h."""

    def __init__(self, cin, classes, size):
        super().__init__()
        layers, pools = [], 5 if size >= 32 else 4  # below 32 px the last max pool is left out
        for width in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
            if width == "M":
                if pools > 0:
                    layers.append(nn.MaxPool2d(2, 2))
                pools -= 1
            else:
                layers += [nn.Conv2d(cin, width, 3, padding=1), nn.ReLU()]
                cin = width
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def make_model(name, cin, classes, size):
    if name == "resnet18":
        return ResNet(BasicBlock, [2, 2, 2, 2], cin, classes, size)
    if name == "resnet50":
        return ResNet(Bottleneck, [3, 4, 6, 3], cin, classes, size)
    if name == "strided_cnn":
        return StridedCNN(cin, classes)
    if name == "mobilenet_v2":
        return MobileNetV2(cin, classes, size)
    if name == "vit_tiny":  # dim 192, depth 6, 3 heads, MLP 768; patch 4 below 64 px, 16 from 64 px
        return VisionTransformer(cin, classes, size, 4 if size < 64 else 16, 192, 6, 3, 768)
    if name == "vgg11":
        return VGG11(cin, classes, size)
    raise SystemExit(f"model_panel.py: unknown model {name}")


def run(a, dev, mode, fmt):
    """Builds the model afresh and times `mode` (eager or graph) in memory format `fmt`; returns (params,
    images/s, ms/step)."""
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    model = make_model(a.model, a.channels, a.classes, a.image_size).to(dev)
    model = model.to(memory_format=fmt)
    params = sum(t.numel() for t in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    amp = torch.bfloat16 if a.amp == "bf16" else None
    g = torch.Generator(device=dev).manual_seed(1234)
    data = [(torch.randn(a.batch, a.channels, a.image_size, a.image_size, device=dev, generator=g)
             .contiguous(memory_format=fmt),
             torch.randint(0, a.classes, (a.batch,), device=dev, generator=g)) for _ in range(4)]

    def body(x, y):
        with torch.autocast(dev.type, dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    if mode == "graph":
        sx, sy = data[0][0].clone(), data[0][1].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                body(sx, sy)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            body(sx, sy)

        def step(i):
            x, y = data[i % 4]
            sx.copy_(x, non_blocking=True)
            sy.copy_(y, non_blocking=True)
            graph.replay()
    else:
        def step(i):
            opt.zero_grad(set_to_none=True)
            body(*data[i % 4])

    for i in range(a.warmup):
        step(i)
    sync()
    t0 = time.perf_counter()
    for i in range(a.steps):
        step(i)
    sync()
    dt = time.perf_counter() - t0
    return params, a.batch * a.steps / dt, 1e3 * dt / a.steps


def add_model_args(p):
    """The options that pick the model, its input and precision (shared with kernel_profile.py)."""
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--amp", default="bf16", choices=["bf16", "off"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--mode", default="eager", choices=["eager", "graph", "both"],
                   help="both: eager, then graph, each on a freshly built model, in one process (one RESULT "
                        "line each; saves a Python start and PyTorch import per row)")
    p.add_argument("--memory-format", default="channels_last", choices=["channels_last", "contiguous", "both"],
                   help="activations' and weights' layout (both: each in turn, one RESULT line each)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--threads", type=int, default=0,
                   help="CPU threads (0: every logical core, as Liftoff uses; PyTorch's own default is the "
                        "physical cores, 1 on a 2-thread VM)")
    a = p.parse_args()
    if a.device == "cpu" and a.mode != "eager":
        p.error("--mode graph/both needs --device cuda (CUDA graphs)")
    torch.backends.cudnn.benchmark = True
    if a.device == "cpu":
        torch.set_num_threads(a.threads if a.threads > 0 else (os.cpu_count() or 1))
    dev = torch.device(a.device)
    formats = {"channels_last": [torch.channels_last], "contiguous": [torch.contiguous_format],
               "both": [torch.channels_last, torch.contiguous_format]}[a.memory_format]
    for mode in (["eager", "graph"] if a.mode == "both" else [a.mode]):
        for fmt in formats:
            params, images_per_s, ms_per_step = run(a, dev, mode, fmt)
            name = "channels_last" if fmt == torch.channels_last else "nchw"
            print(f"RESULT model={a.model} size={a.image_size} batch={a.batch} amp={a.amp} mode={mode} "
                  f"format={name} params={params} images_per_s={images_per_s:.1f} ms_per_step={ms_per_step:.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
