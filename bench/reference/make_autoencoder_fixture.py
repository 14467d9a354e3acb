#!/usr/bin/python3
# Writes tests/fixtures/autoencoder_golden.safetensors: PyTorch reference inputs, reconstructions,
# MSE losses and every parameter gradient of both docs/model-spec.md §8 autoencoders (reduced sizes)
# on rows of the real batch tests/fixtures/model_batch_input.safetensors, for
# tests/test_autoencoder.cpp.
"""Golden values of the §8 autoencoders for lcm's C++ model/autoencoder.

Run: /usr/bin/python3 bench/reference/make_autoencoder_fixture.py [--published FILE]

Weights are drawn in float32 (torch.manual_seed(0), PyTorch default init) and stored as F32 under
"comp.<name>" / "access.<name>"; references are computed in float64 from exactly those values
(dropout off) and stored as F64:
  comp.input [N, 1636]  F32  thresholded §8.1 inputs of the first N computation rows
  comp.recon, comp.loss, comp.embedding, comp.grad.<name>
  access.input [N, 704] F32  §8.2 access sequences of the same rows
  access.recon, access.loss, access.embedding, access.grad.<name>
With --published (default ../shared/data/pretrained/access_matrix_autoencoder_published.safetensors,
when present): published.recon [M, 704] F32 and published.loss, the published access-matrix AE's
reconstruction (float64 compute) of the first M rows' access sequences.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from autoencoder_model import (AccessAutoencoder, CompVectorAutoencoder, access_ae_input,  # noqa: E402
                               comp_ae_input)
from looper_model import read_safetensors  # noqa: E402
from make_fixtures import f32, f64, write_safetensors  # noqa: E402

COMP_SIZES = dict(first=5, tags_hidden=6, domain=7, write=4, read=3, reads=8, expr_hidden=6,
                  bottleneck_hidden=20, embedding=12, decoder_hidden0=16, decoder_hidden1=8)
ACCESS_SIZES = dict(hidden=2)
N_ROWS = 24        # 4 datapoints × 6 computations
N_PUBLISHED = 48


def golden(prefix, model32, x, out):
    """Forward/backward of `model32`'s float64 copy on x; fills out[prefix.*]."""
    init = {k: v.detach().clone() for k, v in model32.state_dict().items()}
    m = type(model32)(**model32.sizes).to(torch.float64)
    m.load_state_dict({k: v.double() for k, v in init.items()})
    m.eval()
    xd = x.double()
    rec = m(xd)
    loss = torch.mean((rec - xd.reshape(rec.shape)) ** 2)
    loss.backward()
    with torch.no_grad():
        emb = m.encoder(xd) if prefix == "comp" else m.encode(xd)
    for k, v in init.items():
        out[f"{prefix}.{k}"] = f32(v)
    for k, p in m.named_parameters():
        out[f"{prefix}.grad.{k}"] = f64(p.grad)
    out[f"{prefix}.input"] = f32(x)
    out[f"{prefix}.recon"] = f64(rec.detach())
    out[f"{prefix}.loss"] = f64(loss.detach()).reshape(())
    out[f"{prefix}.embedding"] = f64(emb)
    zero = [k for k, p in m.named_parameters() if float(p.grad.abs().max()) == 0.0]
    print(f"{prefix}: loss {loss.item():.10g}, parameters {sum(p.numel() for p in m.parameters())}, "
          f"all-zero gradients: {zero}")


def main():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default=os.path.join(repo, "tests", "fixtures", "model_batch_input.safetensors"))
    ap.add_argument("--published", default=os.path.join(
        repo, "..", "shared", "data", "pretrained", "access_matrix_autoencoder_published.safetensors"))
    ap.add_argument("--out", default=os.path.join(repo, "tests", "fixtures", "autoencoder_golden.safetensors"))
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    batch = read_safetensors(args.batch)[0]
    comp = torch.from_numpy(np.array(batch["comp"], dtype=np.float32))
    expr = torch.from_numpy(np.array(batch["expr"], dtype=np.float32))
    comp = comp.reshape(-1, 910)
    expr = expr.reshape(-1, 66, 11)
    out = {}
    torch.manual_seed(0)
    cm = CompVectorAutoencoder(**COMP_SIZES)
    cm.sizes = COMP_SIZES
    golden("comp", cm, comp_ae_input(comp[:N_ROWS], expr[:N_ROWS]), out)
    am = AccessAutoencoder(**ACCESS_SIZES)
    am.sizes = ACCESS_SIZES
    golden("access", am, access_ae_input(comp[:N_ROWS]).reshape(N_ROWS, -1), out)
    meta = {"format": "pt", "generator": "bench/reference/make_autoencoder_fixture.py",
            "torch_version": torch.__version__, "seed": "0", "rows": str(N_ROWS),
            "batch_file": os.path.basename(args.batch),
            "comp_sizes": ",".join(f"{k}={v}" for k, v in COMP_SIZES.items()),
            "access_sizes": ",".join(f"{k}={v}" for k, v in ACCESS_SIZES.items())}
    if os.path.exists(args.published):
        tensors, _ = read_safetensors(args.published)
        pm = AccessAutoencoder(hidden=20).to(torch.float64)
        pm.load_state_dict({k: torch.from_numpy(np.array(v)).double() for k, v in tensors.items()})
        pm.eval()
        x = access_ae_input(comp[:N_PUBLISHED].double()).reshape(N_PUBLISHED, -1)
        with torch.no_grad():
            rec = pm(x)
        out["published.recon"] = f32(rec)
        out["published.loss"] = f64(torch.mean((rec - x) ** 2)).reshape(())
        meta["published_rows"] = str(N_PUBLISHED)
        print(f"published AE: MSE {float(out['published.loss']):.6g} on {N_PUBLISHED} rows "
              f"(mean square of the input {float((x ** 2).mean()):.4g})")
    write_safetensors(args.out, out, meta)
    print(f"{args.out}: {os.path.getsize(args.out)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
