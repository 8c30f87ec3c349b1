#!/usr/bin/env python3
"""Decodes moe4d's TensorBoard event files with an independent reader and compares them with
metrics.jsonl: TFRecord framing checked with a bitwise CRC-32C written here, Event / Summary
messages parsed by python3-protobuf from a schema compiled by protoc.

usage: tensorboard_decode_test.py PROTOC SCHEMA.proto RUN_DIR   (RUN_DIR holds metrics.jsonl, tensorboard/)
"""
import glob
import importlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        header = data[pos:pos + 12]
        assert len(header) == 12, f"{path}: truncated record header at byte {pos}"
        (length,) = struct.unpack("<Q", header[:8])
        (length_crc,) = struct.unpack("<I", header[8:12])
        assert length_crc == masked(crc32c(header[:8])), f"{path}: bad length CRC at byte {pos}"
        body = data[pos + 12:pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        assert body_crc == masked(crc32c(body)), f"{path}: bad data CRC at byte {pos}"
        yield body
        pos += 16 + length


def expected_scalars(r):
    """The scalars documented in trace/tensorboard_sink.h, computed from the metrics record."""
    out = {}
    for key in ["loss", "total_loss", "val_loss", "lr", "grad_norm", "loss_scale", "tokens_per_s",
                "model_tflops_per_s", "mfu"]:
        if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool):
            out[key] = r[key]
    t = r["time"]
    out["time/step_s"] = t["step_s"]
    for group, c in t["comm"].items():
        for field, name in [("exposed_s", "share"), ("waiting_s", "waiting_share"), ("transfer_s", "transfer_share")]:
            if field in c:
                out[f"comm/{group}/{name}"] = c[field] / t["step_s"]
    if "moe" in r:
        for key in ["aux_loss", "z_loss", "dropped_fraction"]:
            out[f"moe/{key}"] = r["moe"][key]
        layers = r["moe"]["layers"]
        out["moe/imbalance_max"] = max(l["imbalance"] for l in layers)
        for l in layers:
            out[f"moe/layer{l['layer']}/imbalance"] = l["imbalance"]
    for i, m in enumerate(r["memory"]["per_rank"]):
        for key in ["params_bytes", "grads_bytes", "optimizer_bytes", "activations_peak_bytes", "peak_bytes",
                    "rss_peak_bytes"]:
            out[f"memory/rank{i}/{key}"] = m[key]
    return out


def main():
    protoc, schema, run_dir = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([protoc, f"--proto_path={os.path.dirname(schema)}", f"--python_out={tmp}", schema], check=True)
        sys.path.insert(0, tmp)
        pb = importlib.import_module(os.path.splitext(os.path.basename(schema))[0] + "_pb2")

        files = glob.glob(os.path.join(run_dir, "tensorboard", "events.out.tfevents.*"))
        assert len(files) == 1, f"expected one event file, found {files}"
        name = os.path.basename(files[0]).split(".")
        assert name[:3] == ["events", "out", "tfevents"] and name[3].isdigit(), files[0]
        events = []
        for body in records(files[0]):
            e = pb.Event()
            e.ParseFromString(body)
            events.append(e)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            metrics = [json.loads(line) for line in f if line.strip()]

        assert events[0].WhichOneof("what") == "file_version" and events[0].file_version == "brain.Event:2"
        steps = events[1:]
        assert [e.step for e in steps] == [r["step"] for r in metrics], "one event per step, in order"
        checked = 0
        for e, r in zip(steps, metrics):
            assert e.WhichOneof("what") == "summary" and e.wall_time > 1e9
            got = {v.tag: v.simple_value for v in e.summary.value}
            assert all(v.WhichOneof("value") == "simple_value" for v in e.summary.value)
            want = expected_scalars(r)
            assert set(got) == set(want), f"step {r['step']}: tags differ: {set(got) ^ set(want)}"
            for tag, value in want.items():
                assert got[tag] == float(np.float32(value)), f"step {r['step']} {tag}: {got[tag]} != {value}"
                checked += 1
        assert "val_loss" in {v.tag for v in steps[-1].summary.value}, "the evaluation step has val_loss"
        assert any(t.endswith("waiting_share") for t in {v.tag for v in steps[-1].summary.value})
        print(f"ok: {len(steps)} steps, {checked} scalars equal metrics.jsonl")


if __name__ == "__main__":
    main()
