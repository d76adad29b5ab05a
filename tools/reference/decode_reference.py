#!/usr/bin/env python3
"""torchvision's batched GPU JPEG decode (nvJPEG through torchvision.io.decode_jpeg(device='cuda')) plus a
RandomResizedCrop-style resize, flip and normalise on the GPU, over a folder of JPEGs already read into memory:
images/s decoded and augmented into the GPU, the peer of Liftoff's bench_loader --decode gpu rows.
  python3 tools/reference/decode_reference.py /tmp/jf/train --batch 256 --size 224
"""
import argparse
import glob
import os
import time

import torch
import torchvision
import torchvision.transforms.v2.functional as TF


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batches", type=int, default=10)
    a = p.parse_args()
    files = sorted(glob.glob(os.path.join(a.folder, "*", "*.jpg")))
    data = [torchvision.io.read_file(f) for f in files]
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(3, 1, 1)

    def batch(i):
        chunk = [data[(i * a.batch + j) % len(data)] for j in range(a.batch)]
        imgs = torchvision.io.decode_jpeg(chunk, device="cuda", mode=torchvision.io.ImageReadMode.RGB)
        out = []
        for img in imgs:  # torchvision has no batched random-resized-crop for ragged images
            h, w = img.shape[-2:]
            s = min(h, w)
            crop = TF.resized_crop(img, (h - s) // 2, (w - s) // 2, s, s, [a.size, a.size], antialias=False)
            out.append(crop)
        x = torch.stack(out).float().div_(255).sub_(mean).div_(std)
        return x.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)

    for i in range(2):
        batch(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(a.batches):
        batch(i)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"RESULT torchvision decode_jpeg(cuda) + resized crop + normalise: {a.batch * a.batches / dt:.1f} images/s "
          f"({len(files)} files, batch {a.batch}, {a.size} px)")


if __name__ == "__main__":
    main()
