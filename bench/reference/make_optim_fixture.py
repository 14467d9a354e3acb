#!/usr/bin/python3
# Writes tests/fixtures/optim_torch_f32.safetensors: PyTorch's own float32 Adam / AdamW results
# (5 steps driven by OneCycleLR), which tests/test_optim.cpp compares to lcm bit for bit.
# Run with Debian's python3-torch: `/usr/bin/python3 bench/reference/make_optim_fixture.py [--out DIR]`.
"""Optimizer fixture for lcm (docs/model-spec.md §6: AdamW, OneCycleLR with momentum cycling).

A parameter of 37 float32 values (not a multiple of the SIMD width, so PyTorch's scalar tail is
exercised too) gets 5 steps with fixed gradients; the optimizer's lr and beta1 are driven by
OneCycleLR(max_lr=1e-2, total_steps=10) stepped after every optimizer step. Stored (all float32
results are PyTorch's, produced by the CPU single-tensor implementation):
  init [37] F32, grads [5, 37] F32, lr [5] F64 / beta1 [5] F64 (values used by step s),
  <kind>.param / <kind>.exp_avg / <kind>.exp_avg_sq [37] F32 after 5 steps, kind = adam, adamw
  (both with weight_decay 0.015: L2 for Adam, decoupled for AdamW).
Layout: the official safetensors layout (u64 LE header length, JSON header padded with spaces
to a multiple of 8, "__metadata__" of strings), written atomically.
"""
import argparse
import json
import os
import struct

import numpy as np
import torch

N = 37
STEPS = 5


def write_safetensors(path, tensors, metadata):
    """{name: np.ndarray} + {str: str} → safetensors at `path` (temp file + rename)."""
    names = {np.dtype("float32"): "F32", np.dtype("float64"): "F64"}
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for k, a in tensors.items():
        data = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        header[k] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, path)


def run(kind, init, grads):
    p = torch.nn.Parameter(init.clone())
    cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
    opt = cls([p], lr=1e-2, weight_decay=0.015)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=10)
    lrs, betas = [], []
    for g in grads:
        lrs.append(opt.param_groups[0]["lr"])
        betas.append(opt.param_groups[0]["betas"][0])
        p.grad = g.clone()
        opt.step()
        sched.step()
    st = opt.state[p]
    return p.detach().numpy().copy(), st["exp_avg"].numpy().copy(), st["exp_avg_sq"].numpy().copy(), lrs, betas


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.manual_seed(606)
    init = torch.randn(N, dtype=torch.float32)
    grads = torch.randn(STEPS, N, dtype=torch.float32) * 0.05
    t = {"init": init.numpy(), "grads": grads.numpy()}
    for kind in ("adam", "adamw"):
        p, m, v, lrs, betas = run(kind, init, grads)
        t[kind + ".param"], t[kind + ".exp_avg"], t[kind + ".exp_avg_sq"] = p, m, v
    t["lr"] = np.array(lrs, dtype=np.float64)
    t["beta1"] = np.array(betas, dtype=np.float64)
    meta = {"generator": "bench/reference/make_optim_fixture.py", "torch_version": torch.__version__,
            "description": "5 Adam/AdamW steps (lr/beta1 from OneCycleLR max_lr 1e-2, total_steps 10; "
                           "weight_decay 0.015, betas (.,0.999), eps 1e-8) on a float32 [37] parameter"}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "optim_torch_f32.safetensors")
    write_safetensors(path, t, meta)
    print("wrote", path)


if __name__ == "__main__":
    main()
