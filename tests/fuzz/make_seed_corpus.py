#!/usr/bin/env python3
"""Regenerates the small seed files of tests/fuzz/corpus/ (valid files and a few broken ones). Needs only the
standard library (and Pillow for the JPEG seed, skipped without it). Run from anywhere:
    python3 tests/fuzz/make_seed_corpus.py
"""
import gzip
import io
import json
import os
import struct
import zlib

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(kind, name, data):
    os.makedirs(os.path.join(HERE, kind), exist_ok=True)
    with open(os.path.join(HERE, kind, name), "wb") as f:
        f.write(data)


def idx(magic, dims, payload):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload


def gz(data):
    return gzip.compress(data, mtime=0)


def safetensors(tensors, metadata=None, pad=True):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def checkpoint():
    w = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    m = struct.pack("<4f", 0.1, 0.2, 0.3, 0.4)
    steps = struct.pack("<q", 3)
    tensors = [("model/fc.weight", "F32", [2, 2], w), ("model/bn.num_batches_tracked", "I64", [], steps),
               ("optimizer/momentum_buffer.0", "F32", [2, 2], m)]
    meta = {"liftoff.format": "liftoff-checkpoint-2", "liftoff.model": "tiny", "liftoff.epoch": "1",
            "liftoff.step": "3", "liftoff.batches_into_epoch": "2", "liftoff.lr": "0.10000000000000001",
            "liftoff.rng.module:drop": "7 12", "liftoff.run": "seed-run", "config": '{"batch":4}'}
    meta["liftoff.crc32"] = str(checkpoint_checksum(meta, tensors))
    return safetensors(tensors, meta)


def checkpoint_checksum(meta, tensors):
    """models/train/checkpoint.cpp checkpoint_checksum: metadata, then names/dtypes/shapes, then the data."""
    text = b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in sorted(meta.items()) if k != "liftoff.crc32")
    for name, dtype, shape, _ in tensors:
        text += name.encode() + b"\0" + dtype.encode() + b"\0" + "".join(f"{d}," for d in shape).encode() + b"\0"
    return zlib.crc32(text + b"".join(raw for _, _, _, raw in tensors))


def png(width, height, rgb):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    channels = 3 if rgb else 1
    rows = b"".join(b"\0" + bytes((x * 40 + y * 7 + c) % 256 for x in range(width) for c in range(channels))
                    for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2 if rgb else 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def bmp(width, height):
    row = bytes((x * 30 + c) % 256 for x in range(width) for c in range(3))
    row += b"\0" * ((4 - len(row) % 4) % 4)
    pixels = row * height
    header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


def main():
    images = idx(0x803, [2, 3, 2], bytes(range(12)))
    labels = idx(0x801, [2], bytes([3, 9]))
    put("idx", "images-valid.idx", images)
    put("idx", "images-valid.idx.gz", gz(images))
    put("idx", "labels-valid.idx", labels)
    put("idx", "labels-valid.idx.gz", gz(labels))
    put("idx", "images-bad-magic.idx", idx(0x802, [2, 3, 2], bytes(12)))
    put("idx", "images-truncated.idx.gz", gz(images)[:-9])
    put("idx", "images-trailing.idx", images + b"xyz")
    put("idx", "images-huge-count.idx.gz", gz(idx(0x803, [0xFFFFFFFF, 28, 28], b"")))

    put("safetensors", "valid.safetensors",
        safetensors([("a", "F32", [2], struct.pack("<2f", 1, 2)), ("b", "U8", [1, 3], b"xyz"),
                     ("c", "BF16", [], b"\x80\x3f"), ("e", "I32", [0], b"")], {"k": "v"}))
    put("safetensors", "valid-unpadded.safetensors", safetensors([("x", "F64", [1], struct.pack("<d", 2.5))], pad=False))
    put("safetensors", "checkpoint.safetensors", checkpoint())
    good = checkpoint()
    put("safetensors", "checkpoint-truncated.safetensors", good[:-5])
    overlap = b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}'
    put("safetensors", "overlap.safetensors", struct.pack("<Q", len(overlap)) + overlap + b"abc")
    put("safetensors", "bad-dtype.safetensors", safetensors([("a", "I8", [1], b"x")]))
    put("safetensors", "header-too-long.safetensors", struct.pack("<Q", 1 << 40) + b"{}")

    put("image", "gray.png", png(5, 4, False))
    put("image", "rgb.png", png(3, 6, True))
    put("image", "rgb.bmp", bmp(4, 3))
    put("image", "truncated.png", png(5, 4, True)[:40])
    try:
        from PIL import Image
        out = io.BytesIO()
        Image.new("RGB", (6, 5), (120, 30, 200)).save(out, format="JPEG", quality=80)
        put("image", "rgb.jpg", out.getvalue())
        # Progressive (several scans, tables between them) and grayscale: other paths of stb_image's decoder.
        gradient = Image.linear_gradient("L").resize((20, 12))
        out = io.BytesIO()
        Image.merge("RGB", (gradient, gradient.rotate(90), gradient.rotate(180))).save(
            out, format="JPEG", quality=90, progressive=True, optimize=True)
        put("image", "progressive.jpg", out.getvalue())
        out = io.BytesIO()
        gradient.save(out, format="JPEG", quality=90)
        put("image", "gray.jpg", out.getvalue())
    except ImportError:
        print("Pillow missing: no JPEG seeds")
    # Restart markers (Pillow cannot write them): one of tests/data/jpeg/'s libjpeg files.
    with open(os.path.join(HERE, "..", "..", "data", "jpeg", "progressive-restart-420.jpg"), "rb") as f:
        put("image", "progressive-restart.jpg", f.read())


if __name__ == "__main__":
    main()
