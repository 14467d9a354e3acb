#!/usr/bin/python3
# Speed of the PyTorch reference model (bench/reference/looper_model.py, release sizes) on CPU or
# CUDA: training datapoints/s (forward + MAPE + backward + AdamW) on real exported batches, and the
# inference latency of one program's ~100 schedules — the baseline lcm's engine is compared to.
# Spec: docs/model-spec.md §5, §6.
"""PyTorch CPU/CUDA baseline of the LOOPer cost model (model-spec §5, §6).

Prepare inputs (a representative sample: the first N batches of the seeded shuffled order):
    build-x/bin/bench_export_batch --data /work/shared/data/looperset-sample/train.jsonl.gz \\
        --dump 12 --dump-dir /tmp/ref_dump --batch-size 512
Run:
    /usr/bin/python3 bench/reference/bench_reference.py --batches /tmp/ref_dump [--threads 2]
    python3 bench/reference/bench_reference.py --batches /tmp/ref_dump --device cuda   (GPU: cuDNN LSTMs;
        batches resident on the device, as bench_model --device cuda:0; inference copies inputs in and
        speedups out)
Without --batches it uses tests/fixtures/model_batch_input.safetensors (B = 32).
OMP_WAIT_POLICY defaults to PASSIVE here (see below); export OMP_WAIT_POLICY=ACTIVE to compare.
"""
import argparse
import glob
import os
import statistics
import sys
import time

# On a shared machine (more runnable threads than cores) GNU OpenMP's default spin-waiting at
# barriers makes every parallel element-wise op of a 2-thread torch ~20x slower (measured here:
# 31 vs 320 training datapoints/s); passive waiting must be chosen before torch loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from looper_model import LooperModel, count_parameters, load_batch, mape_loss  # noqa: E402


def sync(device):
    """Waits for the device's queued work (CUDA), so host clocks measure finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_pass(model, opt, batches):
    """One pass over the batches: forward, MAPE (weight batch_len/batch_size, §6), backward,
    AdamW step. Returns the summed loss (keeps the work observable)."""
    total = 0.0
    batch_size = max(b[0].shape[0] for b in batches)
    for comp, loops, expr, y, tree in batches:
        opt.zero_grad()
        loss = mape_loss(model(comp, loops, expr, tree), y, comp.shape[0] / batch_size)
        loss.backward()
        opt.step()
        total += loss.item()
    return total


def measure(args, batches, n_points):
    """Times training passes and one-program inference with the current torch thread count."""
    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = LooperModel().to(dev)   # release sizes (§5.1), drops 0.05, concat weights zero (§5.3)
    print(f"model: {count_parameters(model):,} parameters")
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.015)
    train_pass(model, opt, batches[:2])   # warm-up (allocator, MKL-DNN primitives)
    rates = []
    for _ in range(args.passes):
        t0 = time.perf_counter()
        train_pass(model, opt, batches)
        rates.append(n_points / (time.perf_counter() - t0))
    print(f"training (forward+backward+AdamW, float32): {statistics.median(rates):.0f} "
          f"datapoints/s (median of {args.passes} passes: {', '.join(f'{r:.0f}' for r in rates)})")

    model.eval()
    if args.infer_dir:
        # the one-program batches bench_model times too (bench_export_batch --programs-dir)
        files = sorted(glob.glob(os.path.join(args.infer_dir, "program_*.safetensors")))
        for f in files:
            comp, loops, expr, y, tree, meta = load_batch(f)

            def query():
                # one autoscheduler query: on CUDA inputs copied in and speedups copied out
                if dev.type == "cpu":
                    return model(comp, loops, expr, tree)
                return model(comp.to(dev), loops.to(dev), expr.to(dev), tree).cpu()
            times = []
            with torch.no_grad():
                query()   # warm-up
                for _ in range(args.infer_reps):
                    t0 = time.perf_counter()
                    query()
                    times.append((time.perf_counter() - t0) * 1e3)
            print(f"inference, features excluded: {os.path.basename(f)}: program "
                  f"{meta.get('program', '?')}, {comp.shape[0]} schedules, C={comp.shape[1]}, "
                  f"{len(tree['nodes'])} loop nodes: wall median {statistics.median(times):.3f} ms "
                  f"(min {min(times):.3f})")
        return
    # inference: one program's schedules, eval mode, no autograd; the batch with the most
    # computations among those holding a program with ≥ infer_points datapoints (else repeated)
    best = max(batches, key=lambda b: (b[0].shape[0] >= args.infer_points, b[0].shape[1]))
    comp, loops, expr, y, tree = best
    reps = -(-args.infer_points // comp.shape[0])
    sl = lambda t: t.repeat((reps,) + (1,) * (t.dim() - 1))[:args.infer_points]  # noqa: E731
    comp, loops, expr = sl(comp), sl(loops), sl(expr)
    times = []
    comp, loops, expr = comp.to(dev), loops.to(dev), expr.to(dev)
    with torch.no_grad():
        model(comp, loops, expr, tree)
        for _ in range(args.infer_reps):
            t0 = time.perf_counter()
            model(comp, loops, expr, tree)
            sync(dev)
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"inference: {args.infer_points} schedules (C={comp.shape[1]}, "
          f"{len(tree['nodes'])} loop nodes, {len(tree['roots'])} roots): median "
          f"{statistics.median(times):.2f} ms, min {min(times):.2f} ms "
          f"({args.infer_reps} runs) = {args.infer_points / statistics.median(times) * 1e3:.0f} "
          "schedules/s")


def device_arg(text):
    """--device: "cpu", "cuda" or "cuda:N" (N >= 0, as lcm's parse_device); anything else
    ("gpu", "banana", "cuda:x") is bad usage: argparse prints the allowed forms and exits 2."""
    if text in ("cpu", "cuda") or (text.startswith("cuda:") and 5 < len(text) <= 9 and text[5:].isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"bad device '{text}' (allowed: cpu, cuda, cuda:N with N >= 0)")


def positive_int(text):
    """An integer >= 1 (argparse type); else argparse's usage error, exit 2."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got '{text}'") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got '{text}'")
    return v


def main():
    """Prints the configuration and the measured throughput / latency."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="", help="folder of batch_*.safetensors (bench_export_batch --dump)")
    ap.add_argument("--threads", default="2,1",
                    help="comma-separated torch thread counts to measure (each run separately)")
    ap.add_argument("--passes", type=positive_int, default=2, help="timed training passes")
    ap.add_argument("--infer-points", type=positive_int, default=100, help="schedules of one program")
    ap.add_argument("--infer-reps", type=positive_int, default=20)
    ap.add_argument("--infer-dir", default="",
                    help="folder of program_*.safetensors (bench_export_batch --programs-dir)")
    ap.add_argument("--device", default="cpu", type=device_arg,
                    help="cpu, cuda or cuda:N (float32; TF32 off for matmuls)")
    args = ap.parse_args()
    if args.device != "cpu":
        if not torch.cuda.is_available():
            print(f"bench_reference: --device {args.device}: torch sees no CUDA device", file=sys.stderr)
            return 1
        index = torch.device(args.device).index or 0
        if index >= torch.cuda.device_count():
            print(f"bench_reference: --device {args.device}: device index out of range "
                  f"({torch.cuda.device_count()} CUDA device(s) visible)", file=sys.stderr)
            return 1
        torch.backends.cuda.matmul.allow_tf32 = False   # full FP32, as lcm's default (training.tf32=false)
        torch.backends.cudnn.allow_tf32 = False
        print(f"  device {args.device}: {torch.cuda.get_device_name(torch.device(args.device))}, "
              f"cuDNN {torch.backends.cudnn.version()} (LSTMs), TF32 off")

    thread_counts = [int(v) for v in args.threads.split(",")]
    torch.set_num_threads(thread_counts[0])
    print(f"torch {torch.__version__}")
    for line in torch.__config__.show().splitlines():
        if any(k in line for k in ("BLAS", "LAPACK", "MKL", "OpenMP", "CPU capability")):
            print("  " + line.strip()[:200])
    print("  " + torch.__config__.parallel_info().replace("\n", "\n  ").strip())
    # "BLAS_INFO=generic" (Debian build): the library actually loaded decides the speed
    with open("/proc/self/maps") as f:
        libs = sorted({ln.split()[-1] for ln in f if "blas" in ln or "lapack" in ln})
    print("  BLAS/LAPACK libraries loaded: " + ", ".join(libs))
    print(f"  OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} (set before torch loads; "
          "ACTIVE spinning is ~10-20x slower on a shared machine)")

    files = sorted(glob.glob(os.path.join(args.batches, "batch_*.safetensors")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0])) if args.batches else \
        [os.path.join(repo, "tests", "fixtures", "model_batch_input.safetensors")]
    if not files:
        print(f"bench_reference: no batch_*.safetensors in {args.batches}", file=sys.stderr)
        return 1
    batches = []
    dev = torch.device(args.device)
    for f in files:   # resident on the device (bench_model --device cuda:0 keeps its batches there too)
        comp, loops, expr, y, tree, _ = load_batch(f)
        batches.append((comp.to(dev), loops.to(dev), expr.to(dev), y.to(dev), tree))
    n_points = sum(b[0].shape[0] for b in batches)
    shapes = ", ".join(f"B{b[0].shape[0]}/C{b[0].shape[1]}/N{len(b[4]['nodes'])}" for b in batches)
    print(f"{len(batches)} batches, {n_points} datapoints: {shapes}")

    for threads in thread_counts:
        torch.set_num_threads(threads)
        print(f"--- torch.set_num_threads({threads})")
        measure(args, batches, n_points)
    return 0


if __name__ == "__main__":
    sys.exit(main())
