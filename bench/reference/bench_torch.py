#!/usr/bin/env python3
"""PyTorch (CPU, float32) reference for bench/bench_engine.cpp: the same LSTM and MLP shapes, the
same losses (sum of h_n; sum of the output for the autoencoder LSTM) and the same table, so both can
be run side by side; --filter gemms adds the bare GEMMs of each MLP layer (BLAS kernel speed).
--device cuda runs the same table on the GPU (the side-by-side of bench/bench_cuda.cpp; each timed call
ends with torch.cuda.synchronize()). Usage: /usr/bin/python3 bench/reference/bench_torch.py --threads 2
[--filter expr] [--device cuda]"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

DEV = torch.device("cpu")  # set by --device


def sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def time_ms(fn, min_reps=5, budget_ms=500.0):
    """Minimum wall ms and median process CPU ms (all threads) of fn(), after 2 warm-up calls."""
    fn()
    fn()
    sync()
    wall, cpu = [], []
    start = time.perf_counter()
    while len(wall) < min_reps or ((time.perf_counter() - start) * 1e3 < budget_ms and len(wall) < 2000):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        sync()
        cpu.append((time.process_time() - c0) * 1e3)
        wall.append((time.perf_counter() - t0) * 1e3)
    return min(wall), statistics.median_low(cpu)


def print_row(name, B, T, flops_fwd, fwd, fb):
    print(f"{name:<30} {B:6d} {T:4d} {fwd[0]:10.3f} {fb[0]:10.3f} {fwd[1]:10.3f} {fb[1]:10.3f} "
          f"{3 * flops_fwd / (fb[0] * 1e6):9.1f}", flush=True)


def bench_lstm(name, In, H, L, bidir, T, B, loss_on_output):
    torch.manual_seed(1)
    lstm = torch.nn.LSTM(In, H, num_layers=L, bidirectional=bidir, batch_first=True).to(DEV)
    x = torch.empty(B, T, In).uniform_(-1, 1).to(DEV)

    def fwd():
        with torch.no_grad():
            lstm(x)

    def fwd_bwd():
        lstm.zero_grad(set_to_none=True)
        out, (h_n, c_n) = lstm(x)
        (out if loss_on_output else h_n).sum().backward()

    D = 2 if bidir else 1
    flops = sum(D * 2.0 * B * T * 4 * H * ((In if l == 0 else D * H) + H) for l in range(L))
    print_row(name, B, T, flops, time_ms(fwd), time_ms(fwd_bwd))


def bench_mlp(B):
    torch.manual_seed(2)
    widths = [1146, 600, 350, 200, 180]
    layers = [torch.nn.Linear(a, b).to(DEV) for a, b in zip(widths[:-1], widths[1:])]
    x = torch.empty(B, widths[0]).uniform_(-1, 1).to(DEV)

    def run(backward):
        h = x
        for lin in layers:
            h = F.elu(lin(h))
        if backward:
            for lin in layers:
                lin.zero_grad(set_to_none=True)
            h.sum().backward()

    def fwd():
        with torch.no_grad():
            run(False)

    flops = sum(2.0 * B * a * b for a, b in zip(widths[:-1], widths[1:]))
    print_row("mlp 1146-600-350-200-180 elu", B, 1, flops, time_ms(fwd), time_ms(lambda: run(True)))


def bench_linear_gemms(B, i, o):
    """The three GEMMs of one linear layer alone (as bench_engine --filter gemms): fwd = X·Wᵀ,
    fwd+bwd = that + dX = dY·W + dW += dYᵀ·X, on torch's BLAS (OpenBLAS)."""
    g = torch.Generator().manual_seed(3)
    X, W, dY = ((torch.rand(*s, generator=g) * 2 - 1).to(DEV) for s in ((B, i), (o, i), (B, o)))
    Y, dX, dW = (torch.empty(B, o, device=DEV), torch.empty(B, i, device=DEV), torch.zeros(o, i, device=DEV))

    def fwd():
        torch.mm(X, W.t(), out=Y)

    def fb():
        fwd()
        torch.mm(dY, W, out=dX)
        dW.addmm_(dY.t(), X)

    print_row(f"gemms linear {i}->{o}", B, 1, 2.0 * B * i * o, time_ms(fwd, 5, 200.0), time_ms(fb, 5, 200.0))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--filter", default="")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    args = ap.parse_args()
    global DEV
    DEV = torch.device(args.device)
    if DEV.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # FP32, as lcm's default
        torch.backends.cudnn.allow_tf32 = False
        print("device:", torch.cuda.get_device_name(DEV))
    torch.set_num_threads(args.threads)
    print(torch.__config__.parallel_info())
    info = [w.strip(" ,") for w in torch.__config__.show().split() if w.startswith("BLAS_INFO=")]
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # make sure the BLAS library is loaded
    with open("/proc/self/maps") as maps:  # which BLAS shared object actually backs "generic"
        libs = sorted({l.split()[-1] for l in maps if "blas" in l.lower() and "/" in l})
    print("torch", torch.__version__, " ".join(info), "BLAS libraries loaded:", ", ".join(libs) or "(none found)")
    print(f"torch bench_torch: threads {torch.get_num_threads()}, float32, device {DEV}")
    print(f"{'case':<30} {'B':>6} {'T':>4} {'fwd_ms':>10} {'fwdbwd_ms':>10} {'fwd_cpu':>10} {'fwdbwd_cpu':>10} "
          f"{'GFLOP/s':>9}")
    cases = [
        ("lstm 180->180 (comps/nodes)", 180, 180, 1, False, 1, False),
        ("lstm 180->180 (comps/nodes)", 180, 180, 1, False, 2, False),
        ("lstm 180->180 (comps/nodes)", 180, 180, 1, False, 4, False),
        ("lstm 180->180 (comps/nodes)", 180, 180, 1, False, 8, False),
        ("lstm 16->100 bidir (tags)", 16, 100, 1, True, 4, False),
        ("lstm 11->100 (expr)", 11, 100, 1, False, 66, False),
        ("lstm 44->20 2L bidir (AE)", 44, 20, 2, True, 16, True),
    ]
    for name, In, H, L, bidir, T, loss_on_output in cases:
        for B in (32, 256, 2048):
            if args.filter in name:
                bench_lstm(name, In, H, L, bidir, T, B, loss_on_output)
    if args.filter in "mlp":
        for B in (32, 256, 2048):
            bench_mlp(B)
    if args.filter and args.filter in "gemms linear":
        widths = [1146, 600, 350, 200, 180]
        for B in (32, 256, 2048):
            for i, o in zip(widths[:-1], widths[1:]):
                bench_linear_gemms(B, i, o)


if __name__ == "__main__":
    main()
