#!/usr/bin/python3
# Trains the PyTorch reference model (bench/reference/looper_model.py, release sizes) on exported
# batches the way lcm-train does, and logs per-epoch train/validation MAPE and speed to a CSV —
# the accuracy and throughput baseline that lcm-train's log_<name>.csv is compared to.
# Spec: docs/model-spec.md §5, §6.
"""Train the PyTorch reference of the LOOPer cost model like lcm-train (model-spec §5, §6).

Settings as lcm-train's defaults: AdamW lr 1e-3, weight_decay 0.015, constant LR, MAPE loss
weighted by batch_len / batch_size (§6), batches in the exported (seeded, shuffled) order every
epoch. Export the batches of lcm-train's preparation (batch 512, data.seed 42,
min_functions_per_footprint 2 for train and 0 for valid) with bench_export_batch --dump.
Run:
    /usr/bin/python3 bench/reference/train_reference.py --train /tmp/refrun/train \\
        --valid /tmp/refrun/valid --epochs 10 --out /tmp/refrun/torch.csv
CSV columns: epoch, train_mape, val_mape (datapoint means, %), seconds (training + validation),
datapoints_per_s (training datapoints / training seconds), lr.
With --best F the weights of the best validation epoch are written to F (safetensors, the
reference's parameter names), so `lcm-eval eval.weights_path=F` scores the PyTorch model with
exactly the metric code that scores lcm's own checkpoints.
Denormal floats are flushed to zero (torch.set_flush_denormal), as lcm's threads do: without it
torch slows ~2x in later epochs on this data while the results do not change.
"""
import argparse
import glob
import os
import sys
import time

# Passive OpenMP waiting must be chosen before torch loads libgomp (see bench_reference.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from looper_model import LooperModel, load_batch, mape_loss  # noqa: E402
from make_fixtures import f32, write_safetensors  # noqa: E402


def load_folder(folder):
    """folder/batch_<i>.safetensors in index order → list of (comp, loops, expr, speedup, tree)."""
    files = sorted(glob.glob(os.path.join(folder, "batch_*.safetensors")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    if not files:
        raise SystemExit(f"train_reference: no batch_*.safetensors in {folder}")
    return [load_batch(f)[:5] for f in files]


def main():
    """Trains for --epochs epochs, printing and writing one CSV row per epoch."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True, help="folder of exported training batches")
    ap.add_argument("--valid", required=True, help="folder of exported validation batches")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=512, help="data.batch_size (loss weight)")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed (init and dropout)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="train_reference.csv", help="CSV written after every epoch")
    ap.add_argument("--best", default="", help="safetensors file for the best-validation weights")
    ap.add_argument("--keep-denormals", action="store_true", help="do not flush denormals")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    if not args.keep_denormals:
        torch.set_flush_denormal(True)
    torch.manual_seed(args.seed)
    train, valid = load_folder(args.train), load_folder(args.valid)
    n_train = sum(b[0].shape[0] for b in train)
    n_valid = sum(b[0].shape[0] for b in valid)
    print(f"torch {torch.__version__}, {args.threads} threads; {n_train} training datapoints in "
          f"{len(train)} batches, {n_valid} validation datapoints in {len(valid)} batches")
    model = LooperModel()   # release sizes (§5.1)
    lr = 1e-3
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.015)
    rows = ["epoch,train_mape,val_mape,seconds,datapoints_per_s,lr"]
    print(f"{'epoch':>6} {'train_MAPE':>12} {'val_MAPE':>12} {'seconds':>9} {'points/s':>10}")
    best = float("inf")
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        loss_sum = 0.0   # Σ batch MAPE · batch_len = datapoint-summed APE (§6 weight undone)
        for comp, loops, expr, y, tree in train:
            opt.zero_grad()
            loss = mape_loss(model(comp, loops, expr, tree), y, comp.shape[0] / args.batch_size)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * args.batch_size
        train_seconds = time.perf_counter() - t0
        model.eval()
        ape_sum = 0.0
        with torch.no_grad():
            for comp, loops, expr, y, tree in valid:
                ape_sum += mape_loss(model(comp, loops, expr, tree), y).item() * comp.shape[0]
        seconds = time.perf_counter() - t0
        train_mape, val_mape = loss_sum / n_train, ape_sum / n_valid
        rate = n_train / train_seconds
        print(f"{epoch:6d} {train_mape:12.4f} {val_mape:12.4f} {seconds:9.2f} {rate:10.1f}",
              flush=True)
        rows.append(f"{epoch},{train_mape!r},{val_mape!r},{seconds:.3f},{rate:.1f},{lr}")
        if args.best and val_mape < best:
            best = val_mape
            write_safetensors(args.best, {k: f32(v) for k, v in model.state_dict().items()},
                              {"lcm.source": "bench/reference/train_reference.py",
                               "epoch": str(epoch), "val_mape": repr(val_mape)})
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(rows) + "\n")
        os.replace(tmp, args.out)   # atomic: a partial run leaves complete rows
    return 0


if __name__ == "__main__":
    sys.exit(main())
