#!/usr/bin/python3
# Writes the PyTorch golden fixtures (tests/fixtures/golden_*.safetensors) that
# tests/test_golden.cpp compares lcm's ops, LSTM and AdamW against, so CI never needs PyTorch.
# Deterministic. Run with Debian's python3-torch: /usr/bin/python3 bench/reference/make_fixtures.py
# Spec: docs/design.md "Tests", docs/model-spec.md §5.2, §6.
"""Golden-value generator for lcm (design.md "Tests", model-spec §5.2, §6).

Conventions of every fixture file:
  * Inputs and weights are drawn in float32 with a fixed torch seed per fixture and stored as F32,
    so lcm (float32) sees exactly the values PyTorch saw.
  * References (outputs, gradients, losses, optimizer results) are computed by PyTorch in float64
    from those exact float32 values and stored as F64: the reference carries no float32 rounding of
    its own, so the C++ error is lcm's rounding alone. (For AdamW the float32 PyTorch run is also
    computed and its distance to the float64 run is stored in the metadata, to justify tolerances;
    likewise for the LSTMs.)
  * Gradients are those of an asymmetric scalarisation L = sum(R ⊙ y) with a random R (stored as
    "r.*"), so a transposed or permuted gradient cannot pass.
  * Files use the official safetensors layout (as written by safetensors.torch.save_file): u64 LE
    header length, JSON header ("__metadata__" first, string -> string, keys sorted) padded
    with spaces to a multiple of 8, data laid out sorted by the crate's dtype order descending
    (U64, I64, F64, F32, ...) then by name.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

DTYPE_NAME = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64",
              np.dtype("int32"): "I32", np.dtype("uint8"): "U8"}

DTYPE_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32",
               "F32", "F64", "I64", "U64"]


def write_safetensors(path, tensors, metadata):
    """Writes {name: np.ndarray} + {str: str} metadata as a safetensors file (official layout),
    atomically (temp file + rename)."""
    arrays = {k: np.array(v, order="C") for k, v in tensors.items()}  # keeps rank 0
    # the reference writer (safetensors Rust crate, tensor.rs `prepare`) sorts by its Dtype enum
    # order descending (U64, I64, F64, F32, ... BOOL), then by name
    order = sorted(arrays, key=lambda k: (-DTYPE_ORDER.index(DTYPE_NAME[arrays[k].dtype]), k))
    # metadata keys sorted (the reference crate keeps them in a HashMap: any order is valid)
    header = {"__metadata__": {str(k): str(metadata[k]) for k in sorted(metadata)}}
    offset = 0
    blobs = []
    for k in order:
        a = arrays[k]
        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[k] = {"dtype": DTYPE_NAME[a.dtype], "shape": list(a.shape),
                     "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def f32(t):
    """float32 numpy copy of a tensor."""
    return t.detach().to(torch.float32).cpu().numpy()


def f64(t):
    """float64 numpy copy of a tensor."""
    return t.detach().to(torch.float64).cpu().numpy()


def rand32(*shape, scale=1.0):
    """Standard-normal float32 values times `scale`, returned as float64 tensor holding exactly
    float32-representable values."""
    return (torch.randn(*shape, dtype=torch.float32) * scale).to(torch.float64)


def away_from_zero(t, margin=0.05):
    """Moves values with |v| < margin to ±margin (activations' kinks are not differentiable)."""
    s = torch.where(t >= 0, torch.ones_like(t), -torch.ones_like(t))
    return torch.where(t.abs() < margin, s * margin, t).to(torch.float32).to(torch.float64)


def normwise(a, b):
    """max|a - b| / max|b| (b the float64 reference)."""
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def meta(desc, seed):
    """The string metadata stored in every golden fixture."""
    return {"format": "pt", "generator": "bench/reference/make_fixtures.py",
            "torch_version": torch.__version__, "seed": str(seed), "description": desc}


# ------------------------------------------------------------------------------------------------
def fixture_linear(out_dir):
    """golden_linear: torch.nn.functional.linear on x [5,7] (and x [2,3,7]) with W [4,7], b [4]."""
    seed = 101
    torch.manual_seed(seed)
    x = rand32(5, 7).requires_grad_()
    w = rand32(4, 7, scale=0.5).requires_grad_()
    b = rand32(4, scale=0.5).requires_grad_()
    r = rand32(5, 4)
    y = torch.nn.functional.linear(x, w, b)
    (y * r).sum().backward()
    t = {"x": f32(x), "weight": f32(w), "bias": f32(b), "r.y": f32(r), "y": f64(y),
         "grad.x": f64(x.grad), "grad.weight": f64(w.grad), "grad.bias": f64(b.grad)}
    # the same W, b on a rank-3 input (as the model's [B, C, features] computation tensors)
    xb = rand32(2, 3, 7).requires_grad_()
    rb = rand32(2, 3, 4)
    w.grad, b.grad = None, None
    yb = torch.nn.functional.linear(xb, w, b)
    (yb * rb).sum().backward()
    t.update({"batched.x": f32(xb), "batched.r.y": f32(rb), "batched.y": f64(yb),
              "batched.grad.x": f64(xb.grad), "batched.grad.weight": f64(w.grad),
              "batched.grad.bias": f64(b.grad)})
    write_safetensors(os.path.join(out_dir, "golden_linear.safetensors"), t,
                      meta("y = x W^T + b, x [5,7], W [4,7], b [4]; grads of sum(r.y * y); "
                           "batched.*: the same W, b on x [2,3,7]", seed))


def fixture_activations(out_dir):
    """golden_activations: ELU(1), LeakyReLU(0.01), sigmoid, tanh of x [4,6] and their gradients."""
    seed = 202
    torch.manual_seed(seed)
    x = away_from_zero(rand32(4, 6, scale=2.0)).requires_grad_()
    t = {"x": f32(x)}
    fns = {"elu": lambda v: torch.nn.functional.elu(v, alpha=1.0),
           "leaky_relu": lambda v: torch.nn.functional.leaky_relu(v, negative_slope=0.01),
           "sigmoid": torch.sigmoid, "tanh": torch.tanh}
    for name, fn in fns.items():
        r = rand32(4, 6)
        if x.grad is not None:
            x.grad = None
        y = fn(x)
        (y * r).sum().backward()
        t[name + ".y"] = f64(y)
        t[name + ".r"] = f32(r)
        t[name + ".grad.x"] = f64(x.grad)
    write_safetensors(os.path.join(out_dir, "golden_activations.safetensors"), t,
                      meta("elu(alpha 1), leaky_relu(0.01), sigmoid, tanh on x [4,6] "
                           "(|x| >= 0.05); "
                           "<op>.grad.x = grad of sum(<op>.r * <op>.y)", seed))


def mape_reference(pred, target, weight):
    """model-spec §6: 100 * mean_i |y_i - yhat_i| / (y_i + 1e-5), times batch_len / batch_size."""
    return 100.0 * torch.mean(torch.abs(target - pred) / (target + 1e-5)) * weight


def fixture_mape(out_dir):
    """golden_mape: the §6 loss on pred/target [6], weight 1 and 6/8, with d loss / d pred."""
    seed = 303
    torch.manual_seed(seed)
    batch_len, batch_size = 6, 8
    # speedups are positive (clipped to [0.01, ...] in the data); predictions anywhere around them
    target = torch.exp(rand32(batch_len)).to(torch.float32).to(torch.float64)
    pred = (target * (1 + rand32(batch_len, scale=0.5))).to(torch.float32).to(torch.float64)
    pred = pred.requires_grad_()
    assert (pred - target).abs().min() > 1e-3
    t = {"pred": f32(pred), "target": f32(target),
         "weight": np.array([batch_len / batch_size], dtype=np.float64)}
    for tag, wgt in (("plain", 1.0), ("weighted", batch_len / batch_size)):
        if pred.grad is not None:
            pred.grad = None
        loss = mape_reference(pred, target, wgt)
        loss.backward()
        t[tag + ".loss"] = f64(loss).reshape(())
        t[tag + ".grad.pred"] = f64(pred.grad)
    write_safetensors(os.path.join(out_dir, "golden_mape.safetensors"), t,
                      meta("MAPE (model-spec section 6) on pred/target [6]; plain (weight 1) "
                           "and weighted "
                           "(batch_len/batch_size = 6/8); gradients of the loss itself", seed))


def fixture_lstm(out_dir, name, input_size, hidden, layers, bidirectional, batch, steps, seed):
    """golden_<name>: torch.nn.LSTM (batch_first) forward + all gradients on x [batch, steps, in].
    Returns PyTorch's float32-vs-float64 normwise deviations (forward, gradients)."""
    torch.manual_seed(seed)
    lstm32 = torch.nn.LSTM(input_size, hidden, num_layers=layers, bidirectional=bidirectional,
                           batch_first=True)  # PyTorch default init: U(±1/sqrt(hidden))
    lstm = torch.nn.LSTM(input_size, hidden, num_layers=layers, bidirectional=bidirectional,
                         batch_first=True).to(torch.float64)
    lstm.load_state_dict({k: v.to(torch.float64) for k, v in lstm32.state_dict().items()})
    x = rand32(batch, steps, input_size).requires_grad_()
    out, (h_n, c_n) = lstm(x)
    r_out, r_h, r_c = rand32(*out.shape), rand32(*h_n.shape), rand32(*c_n.shape)
    ((out * r_out).sum() + (h_n * r_h).sum() + (c_n * r_c).sum()).backward()
    t = {"x": f32(x), "output": f64(out), "h_n": f64(h_n), "c_n": f64(c_n),
         "r.output": f32(r_out), "r.h_n": f32(r_h), "r.c_n": f32(r_c), "grad.x": f64(x.grad)}
    for k, p in lstm32.state_dict().items():
        t["lstm." + k] = f32(p)
    for k, p in lstm.named_parameters():
        t["grad.lstm." + k] = f64(p.grad)
    # PyTorch's own float32 run, normwise (max|a-b| / max|b|) against the float64 reference:
    # how much float32 rounding alone moves these numbers (stored to justify the C++ tolerances)
    x32 = x.detach().to(torch.float32).requires_grad_()
    out32, (h32, c32) = lstm32(x32)
    loss32 = (out32 * r_out.float()).sum() + (h32 * r_h.float()).sum() + (c32 * r_c.float()).sum()
    loss32.backward()
    dev_fwd = max(normwise(a, b) for a, b in ((out32, out), (h32, h_n), (c32, c_n)))
    dev_grad = max([normwise(x32.grad, x.grad)] +
                   [normwise(p32.grad, p.grad) for (_, p32), (_, p) in
                    zip(lstm32.named_parameters(), lstm.named_parameters())])
    dirs = 2 if bidirectional else 1
    desc = (f"torch.nn.LSTM(input {input_size}, hidden {hidden}, layers {layers}, bidirectional "
            f"{bidirectional}, batch_first) on x [{batch},{steps},{input_size}]; output "
            f"[{batch},{steps},{dirs * hidden}], h_n/c_n [{layers * dirs},{batch},{hidden}]; "
            "weights 'lstm.<state_dict name>'; grads of sum(r.output*output)+sum(r.h_n*h_n)+"
            "sum(r.c_n*c_n)")
    m = meta(desc, seed)
    m.update({"torch_f32_vs_f64_forward_normwise": repr(dev_fwd),
              "torch_f32_vs_f64_grad_normwise": repr(dev_grad)})
    write_safetensors(os.path.join(out_dir, f"golden_{name}.safetensors"), t, m)
    return dev_fwd, dev_grad


class TinyMlp(torch.nn.Module):
    """Linear 4→8, ELU, Linear 8→1 (squeezed to [B])."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(torch.nn.functional.elu(self.fc1(x))).squeeze(-1)


def run_adamw(init, x, y, dtype, steps, lr, wd):
    """`steps` AdamW steps of TinyMlp from `init` in `dtype`; returns (losses before each step,
    state_dict after each step)."""
    model = TinyMlp().to(dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in init.items()})
    # default betas (0.9, 0.999), eps 1e-8
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    losses, snapshots = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = mape_reference(model(x.to(dtype)), y.to(dtype), 1.0)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    return losses, snapshots


def fixture_adamw(out_dir):
    """golden_adamw: 5 AdamW steps on TinyMlp with the §6 MAPE loss; returns PyTorch's
    float32-vs-float64 deviations (max |dw| after 5 steps, max relative loss deviation)."""
    seed = 505
    torch.manual_seed(seed)
    init = {k: v.clone() for k, v in TinyMlp().state_dict().items()}  # float32 default init
    x = rand32(16, 4)
    y = torch.exp(rand32(16, scale=0.5)).to(torch.float32).to(torch.float64)
    steps, lr, wd = 5, 1e-2, 0.015
    losses, snaps = run_adamw(init, x, y, torch.float64, steps, lr, wd)
    losses32, snaps32 = run_adamw(init, x, y, torch.float32, steps, lr, wd)
    t = {"x": f32(x), "y": f32(y), "losses": np.array(losses, dtype=np.float64)}
    for k, v in init.items():
        t["init." + k] = f32(v)
    for s, snap in enumerate(snaps):
        for k, v in snap.items():
            t[f"step{s + 1}.{k}"] = f64(v)
    # how far PyTorch's own float32 run is from the float64 reference (tolerance justification)
    w_dev = max(float((snaps32[-1][k].double() - snaps[-1][k]).abs().max()) for k in init)
    l_dev = max(abs(a - b) / abs(b) for a, b in zip(losses32, losses))
    m = meta("5 AdamW steps (lr 1e-2, weight_decay 0.015, betas (0.9,0.999), eps 1e-8) on "
             "fc1 Linear 4->8, ELU, fc2 Linear 8->1, loss = MAPE (model-spec section 6, weight 1) "
             "of fc2(...)[:,0] vs y "
             "on x [16,4], y [16]; losses[s] = loss before step s+1; "
             "step<s>.<name> = weights after "
             "step s (float64 run)", seed)
    m.update({"lr": repr(lr), "weight_decay": repr(wd), "steps": str(steps),
              "torch_f32_vs_f64_max_abs_weight_dev": repr(w_dev),
              "torch_f32_vs_f64_max_rel_loss_dev": repr(l_dev)})
    write_safetensors(os.path.join(out_dir, "golden_adamw.safetensors"), t, m)
    return w_dev, l_dev


def fixture_layout(out_dir):
    """A file for the safetensors reader test: several dtypes, a scalar, an empty tensor, metadata.
    Values are hand-picked constants (the test hard-codes the same constants)."""
    t = {"a_f32": np.array([[0.5, -1.25, 3.0], [1e-3, -0.0, 7.0]], dtype=np.float32),
         "b_f64": np.array([math.pi, -math.e, 1e300], dtype=np.float64),
         "c_i64": np.array([-3, 2 ** 40], dtype=np.int64),
         "d_scalar": np.array(42.0, dtype=np.float32),
         "e_empty": np.zeros((0, 3), dtype=np.float32)}
    write_safetensors(os.path.join(out_dir, "safetensors_layout.safetensors"), t,
                      {"format": "pt", "lcm_note": "reader layout fixture"})


def main():
    """Writes every fixture into --out (default tests/fixtures) and prints sizes and deviations."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--out", default=os.path.join(repo, "tests", "fixtures"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    fixture_linear(args.out)
    fixture_activations(args.out)
    fixture_mape(args.out)
    for name, layers, bi, seed in (("lstm", 1, False, 401), ("bilstm", 1, True, 402),
                                   ("bilstm2", 2, True, 403)):
        dev_fwd, dev_grad = fixture_lstm(args.out, name, 6, 5, layers, bi, 3, 4, seed)
        print(f"{name}: torch float32 vs float64 normwise: forward {dev_fwd:.3e}, "
              f"gradients {dev_grad:.3e}")
    # a long sequence like the expression LSTM's (model-spec §5.2 exprs_embed: 66 steps of 11)
    dev_fwd, dev_grad = fixture_lstm(args.out, "lstm_long", 11, 4, 1, False, 2, 66, seed=404)
    print(f"lstm_long: torch float32 vs float64 normwise: forward {dev_fwd:.3e}, "
          f"gradients {dev_grad:.3e}")
    w_dev, l_dev = fixture_adamw(args.out)
    fixture_layout(args.out)
    print(f"AdamW: torch float32 vs float64 after 5 steps: max |dw| = {w_dev:.3e}, "
          f"max rel loss dev = {l_dev:.3e}")
    for f in sorted(os.listdir(args.out)):
        if f.endswith(".safetensors"):
            print(f"{f}: {os.path.getsize(os.path.join(args.out, f))} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
