#!/usr/bin/env python3
"""Reads TensorBoard event files the way TensorBoard does, independently of Liftoff's writer: TFRecord framing
with masked CRC-32C checks (crcmod's crc-32c) and tensorflow.Event messages decoded by Google's protobuf runtime
from the field numbers of tensorboard/compat/proto/event.proto and summary.proto.

  read_tfevents.py EVENTS_FILE [--jsonl metrics.jsonl]

Checks the framing and CRCs, that the first event is file_version "brain.Event:2", and that every other event
holds scalars; prints the scalars per tag. With --jsonl, also checks that train/loss, train/images_per_s,
train/step_ms, test/loss and test/accuracy equal the figures of the JSON lines log at the same steps.
Exit codes: 0 ok, 1 a check failed, 77 python3-protobuf or python3-crcmod missing (the test is skipped).
"""
import argparse
import json
import math
import struct
import sys

try:
    import crcmod.predefined
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError as e:  # Debian: python3-protobuf, python3-crcmod (scripts/setup.sh installs them)
    print(f"skipped: {e}")
    sys.exit(77)

F = descriptor_pb2.FieldDescriptorProto


def event_class():
    """tensorflow.Event with the fields TensorBoard's scalar plugin reads (same numbers, same oneofs)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="liftoff_test_event.proto", package="tensorflow",
                                             syntax="proto3")
    value = fdp.message_type.add(name="Value")
    value.oneof_decl.add(name="value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL, oneof_index=0)
    value.field.add(name="node_name", number=7, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    summary = fdp.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tensorflow.Value")
    event = fdp.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    event.field.add(name="graph_def", number=4, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL, oneof_index=0)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, oneof_index=0,
                    type_name=".tensorflow.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    descriptor = pool.FindMessageTypeByName("tensorflow.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


CRC32C = crcmod.predefined.mkCrcFun("crc-32c")


def masked_crc(data):
    crc = CRC32C(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            raise ValueError(f"{path}: a torn record header at byte {pos}")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if length_crc != masked_crc(header):
            raise ValueError(f"{path}: the length's CRC is wrong at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or len(data) < pos + 16 + length:
            raise ValueError(f"{path}: a torn record at byte {pos}")
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if body_crc != masked_crc(body):
            raise ValueError(f"{path}: the data's CRC is wrong at byte {pos}")
        yield body
        pos += 16 + length


def read_scalars(path):
    Event = event_class()
    scalars = {}
    for i, body in enumerate(records(path)):
        event = Event()
        event.ParseFromString(body)
        if event.wall_time < 1.0e9:
            raise ValueError(f"{path}: event {i} has no wall time ({event.wall_time})")
        if i == 0:
            if event.WhichOneof("what") != "file_version" or event.file_version != "brain.Event:2":
                raise ValueError(f"{path}: the first event is not file_version brain.Event:2: {event}")
            continue
        if event.WhichOneof("what") != "summary" or not event.summary.value:
            raise ValueError(f"{path}: event {i} holds no summary: {event}")
        for v in event.summary.value:
            if v.WhichOneof("value") != "simple_value":
                raise ValueError(f"{path}: event {i}, tag {v.tag}: not a simple_value")
            scalars.setdefault(v.tag, []).append((event.step, v.simple_value))
    return scalars


def compare_with_jsonl(scalars, jsonl_path):
    pairs = {"train": {"train/loss": "loss", "train/images_per_s": "images_per_s", "train/step_ms": "step_ms",
                       "train/lr": "lr"},
             "eval": {"test/loss": "test_loss", "test/accuracy": "accuracy"}}
    problems = []
    lines = [json.loads(line) for line in open(jsonl_path)]
    for tag_kind, fields in pairs.items():
        records_of_kind = [r for r in lines if r["kind"] == tag_kind]
        for tag, field in fields.items():
            expected = [(r["step"], r[field]) for r in records_of_kind if r[field] is not None]
            got = scalars.get(tag, [])
            if len(got) != len(expected):
                problems.append(f"{tag}: {len(got)} scalars, the log has {len(expected)} {field} figures")
                continue
            for (gs, gv), (es, ev) in zip(got, expected):
                if gs != es or not math.isclose(gv, ev, rel_tol=1e-6, abs_tol=1e-30):
                    problems.append(f"{tag}: step {gs} value {gv}, the log says step {es} {field} {ev}")
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("events")
    parser.add_argument("--jsonl")
    args = parser.parse_args()
    try:
        scalars = read_scalars(args.events)
    except ValueError as e:
        print(f"FAIL {e}")
        return 1
    for tag in sorted(scalars):
        print(f"{tag}: {len(scalars[tag])} values, last {scalars[tag][-1]}")
    problems = compare_with_jsonl(scalars, args.jsonl) if args.jsonl else []
    for p in problems:
        print(f"FAIL {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
