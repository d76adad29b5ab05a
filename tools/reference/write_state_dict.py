"""Writes a PyTorch state_dict as a safetensors file without the `safetensors` package (Debian has none): an 8-byte
little-endian header length, the JSON header {name: {dtype, shape, data_offsets}}, then the raw little-endian
bytes, exactly what `safetensors.torch.save_file(model.state_dict(), path)` writes.

The model is Liftoff's strided_cnn (models/nn/zoo.cpp) written in PyTorch with the same module names, so the file
is what a PyTorch user hands to `train --init-from`. A second file holds a fixed input and the logits PyTorch
computes from it in eval mode, so the test checks that the weights mean the same in Liftoff, not just that they
load. Used by tests/models/train/weights_test.cpp (run from the repository root; python3-torch, CPU):

    python3 tools/reference/write_state_dict.py tests/models/train/data
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8"}


def save_file(tensors, path, metadata=None):
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


class StridedCNN(nn.Module):
    def __init__(self, in_channels=1, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.conv3 = nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(64)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        return self.fc(x.mean((2, 3)))


def main(out_dir):
    torch.manual_seed(26)
    model = StridedCNN()
    model.train()
    for _ in range(3):  # running statistics and num_batches_tracked that are not the initial ones
        model(torch.randn(8, 1, 28, 28) * 2 + 0.5)
    model.eval()
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        logits = model(x)
    save_file(model.state_dict(), os.path.join(out_dir, "strided_cnn_torch.safetensors"))
    save_file({"input": x, "logits": logits}, os.path.join(out_dir, "strided_cnn_torch_expected.safetensors"),
              {"torch": torch.__version__})
    print("wrote", len(model.state_dict()), "tensors; logits[0]", logits[0].tolist())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/models/train/data")
