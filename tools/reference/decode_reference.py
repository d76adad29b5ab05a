#!/usr/bin/env python3
"""torchvision's batched GPU JPEG decode (nvJPEG through torchvision.io.decode_jpeg(device='cuda')) plus a
RandomResizedCrop-style resize, flip and normalise on the GPU, over a folder of JPEGs already read into memory:
images/s decoded and augmented into the GPU, the peer of Liftoff's bench_loader --decode gpu rows.
With --dataloader-workers N it also times PyTorch's usual CPU pipeline on the same files, the peer of the
--decode cpu row: torch.utils.data.DataLoader over torchvision's ImageFolder (PIL decode, RandomResizedCrop,
RandomHorizontalFlip, ToTensor, Normalize), N workers, pinned memory, each batch copied to the GPU.
  python3 tools/reference/decode_reference.py /tmp/jf/train --batch 256 --size 224 --dataloader-workers 14
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
    p.add_argument("--dataloader-workers", type=int, default=0, help="also time the DataLoader + PIL pipeline")
    a = p.parse_args()
    if a.dataloader_workers > 0:
        time_dataloader(a)
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


def time_dataloader(a):
    import torchvision.transforms as T

    tf = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(a.folder, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.dataloader_workers,
                                         pin_memory=True, drop_last=True, persistent_workers=True)
    warmup, timed, images, wanted = 2, 0, 0, max(a.batches, 20)
    while timed < wanted:  # as many epochs as it takes; the first two batches (workers starting) are not timed
        for i, (x, _) in enumerate(loader):
            x = x.cuda(non_blocking=True)
            if warmup > 0:
                warmup -= 1
                if warmup == 0:
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                continue
            images += x.shape[0]
            timed += 1
            if timed == wanted:
                break
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"RESULT DataLoader (PIL decode, RandomResizedCrop, flip, normalise, pinned, to GPU), "
          f"{a.dataloader_workers} workers: {images / dt:.1f} images/s ({len(ds)} files, batch {a.batch}, {a.size} px)")


if __name__ == "__main__":
    main()
