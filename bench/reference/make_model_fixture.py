#!/usr/bin/python3
# Writes tests/fixtures/model_golden.safetensors: PyTorch reference predictions, MAPE loss, every
# parameter gradient and 3 AdamW steps of the LOOPer model (reduced sizes) on the real batch
# tests/fixtures/model_batch_input.safetensors, for tests/test_model_golden.cpp.
# Spec: docs/model-spec.md §5, §6.
"""Golden values of the whole cost model (model-spec §5, §6) for lcm's C++ model.

Run: /usr/bin/python3 bench/reference/make_model_fixture.py
(after build-*/bin/bench_export_batch wrote tests/fixtures/model_batch_input.safetensors).

Conventions (as make_fixtures.py): weights are drawn in float32 (torch.manual_seed(0), the §5.3
initialisation except that the concat layers are NOT zeroed, so every parameter gets a gradient,
and predict.bias = 0.5 so the predictions lie in LeakyReLU's linear branch, on both sides of
the targets)
and stored as F32 under their PyTorch names; the references are computed by PyTorch in float64
from exactly those values and stored as F64:
  pred [B]              ŷ of §5.4 (dropout probabilities 0: eval semantics)
  loss []               MAPE of §6 with weight batch_len / batch_size = 1 (batch_size = B)
  grad.<name>           d loss / d parameter
  step_losses [4]       loss before AdamW step 1, 2, 3 and after step 3 (lr 1e-3, wd 0.015,
                        betas (0.9, 0.999), eps 1e-8, model-spec §6)
  step3.<name>          the weights after the 3 AdamW steps
Metadata: the model sizes, and PyTorch's own float32-vs-float64 deviations (normwise
max|a − b| / max|b|) of the same computation, to justify the C++ float32 tolerances.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from looper_model import LooperModel, count_parameters, load_batch, mape_loss  # noqa: E402
from make_fixtures import f32, f64, normwise, write_safetensors  # noqa: E402

SIZES = dict(input_size=846, comp_embed_layer_sizes=[60, 35, 20, 18],
             drops=[0.0, 0.0, 0.0, 0.0, 0.0], lstm_embedding_size=10, expr_embed_size=10,
             loops_tensor_size=8)
LR, WD, STEPS = 1e-3, 0.015, 3
PREDICT_BIAS = 0.5


def run(model, comp, loops, expr, y, tree):
    """Forward + MAPE + backward, then STEPS AdamW steps. Returns (pred, loss, grads dict at the
    initial weights, losses [STEPS + 1] = before each step and after the last, final state)."""
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        pred_s = model(comp, loops, expr, tree)
        loss_s = mape_loss(pred_s, y, 1.0)
        loss_s.backward()
        if s == 0:
            pred, loss = pred_s.detach().clone(), loss_s.detach().clone()
            grads = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
        losses.append(loss_s.item())
        opt.step()
    with torch.no_grad():
        losses.append(mape_loss(model(comp, loops, expr, tree), y, 1.0).item())
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return pred, loss, grads, losses, final


def main():
    """Builds the fixture and prints its size and the float32-vs-float64 deviations."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default=os.path.join(repo, "tests", "fixtures",
                                                    "model_batch_input.safetensors"))
    ap.add_argument("--out", default=os.path.join(repo, "tests", "fixtures",
                                                  "model_golden.safetensors"))
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    comp, loops, expr, y, tree, bmeta = load_batch(args.batch, torch.float64)
    torch.manual_seed(0)
    model32 = LooperModel(**SIZES, zero_concat=False)
    with torch.no_grad():
        # puts the predictions into LeakyReLU's linear branch and on both sides of the targets
        # (at seed 0 they are all ≈ −9e-4: only the 0.01 slope would be tested)
        model32.predict.bias.fill_(PREDICT_BIAS)
    init = {k: v.detach().clone() for k, v in model32.state_dict().items()}
    model64 = LooperModel(**SIZES, zero_concat=False).to(torch.float64)
    model64.load_state_dict({k: v.to(torch.float64) for k, v in init.items()})
    model32.eval()
    model64.eval()

    pred, loss, grads, losses, final = run(model64, comp, loops, expr, y, tree)
    pred32, loss32, grads32, losses32, final32 = run(
        model32, comp.float(), loops.float(), expr.float(), y.float(), tree)

    # margins that decide whether float32 noise can flip a non-smooth point (|ŷ − y| in MAPE,
    # the LeakyReLU kink at 0)
    with torch.no_grad():
        model_tmp = LooperModel(**SIZES, zero_concat=False).to(torch.float64)
        model_tmp.load_state_dict({k: v.to(torch.float64) for k, v in init.items()})
        model_tmp.eval()
        x = model_tmp.embed_computations(comp, expr)
        roots = torch.cat([model_tmp.node_embedding(tree, r, x, loops) for r in tree["roots"]], 1)
        h = model_tmp._mlp(model_tmp.regression_layers,
                           model_tmp._last_hidden(model_tmp.roots_lstm, roots).unsqueeze(1))
        pre = model_tmp.predict(h)[:, 0, 0]
    min_rel_gap = float(((pred - y).abs() / y).min())
    # how much the predictions depend on each datapoint's own inputs: normwise change when the
    # loop vectors / computation vectors of the datapoints are rotated by one (a batch-mixing bug
    # in the C++ model would show up at this scale)
    with torch.no_grad():
        sens_loops = normwise(model_tmp(comp, loops.roll(1, 0), expr, tree), pred)
        sens_comp = normwise(model_tmp(comp.roll(1, 0), loops, expr, tree), pred)
    min_pre_act = float(pre.abs().min())

    t = {"pred": f64(pred), "loss": f64(loss).reshape(()),
         "step_losses": np.array(losses, dtype=np.float64)}
    for k, v in init.items():
        t[k] = f32(v)
    for k, g in grads.items():
        t["grad." + k] = f64(g)
    for k, v in final.items():
        t["step3." + k] = f64(v)

    dev_pred = normwise(pred32, pred)
    dev_loss = abs(loss32.item() - loss.item()) / abs(loss.item())
    dev_grad = {k: normwise(grads32[k], grads[k]) for k in grads}
    dev_steps = max(abs(a - b) / abs(b) for a, b in zip(losses32, losses))
    dev_final = max(float((final32[k].double() - final[k]).abs().max()) for k in final)
    n_params = count_parameters(model64)
    meta = {"format": "pt", "generator": "bench/reference/make_model_fixture.py",
            "torch_version": torch.__version__, "seed": "0",
            "batch_file": os.path.basename(args.batch), "batch_footprint": bmeta.get("footprint", ""),
            "input_size": str(SIZES["input_size"]),
            "comp_embed_layer_sizes": ",".join(map(str, SIZES["comp_embed_layer_sizes"])),
            "drops": ",".join(map(str, SIZES["drops"])),
            "lstm_embedding_size": str(SIZES["lstm_embedding_size"]),
            "expr_embed_size": str(SIZES["expr_embed_size"]),
            "loops_tensor_size": str(SIZES["loops_tensor_size"]),
            "n_parameters": str(n_params), "lr": repr(LR), "weight_decay": repr(WD),
            "steps": str(STEPS), "concat_layers": "xavier (not zeroed)",
            "description": "LOOPer model (model-spec section 5) with the sizes above, dropout 0; "
                           "pred/loss/grad.* in float64 from the F32 weights; step_losses = "
                           "loss before AdamW steps 1..3 and after step 3; step3.* = weights "
                           "after 3 steps",
            "predict_bias": repr(PREDICT_BIAS),
            "sensitivity_rotate_loops_normwise": repr(sens_loops),
            "sensitivity_rotate_comp_normwise": repr(sens_comp),
            "min_rel_gap_pred_target": repr(min_rel_gap),
            "min_abs_predict_preactivation": repr(min_pre_act),
            "torch_f32_vs_f64_pred_normwise": repr(dev_pred),
            "torch_f32_vs_f64_loss_rel": repr(dev_loss),
            "torch_f32_vs_f64_grad_normwise_max": repr(max(dev_grad.values())),
            "torch_f32_vs_f64_step_loss_rel_max": repr(dev_steps),
            "torch_f32_vs_f64_step3_weight_abs_max": repr(dev_final)}
    write_safetensors(args.out, t, meta)
    print(f"parameters: {n_params:,}; batch B={comp.shape[0]} C={comp.shape[1]} "
          f"L={loops.shape[1]}; tree {tree}")
    print(f"pred[:6] = {pred[:6].tolist()}\ntarget[:6] = {y[:6].tolist()}")
    print(f"loss = {loss.item():.10g}; step losses = {losses}")
    print(f"sensitivity (normwise change of pred): rotate loops {sens_loops:.3e}, "
          f"rotate comp {sens_comp:.3e}")
    print(f"margins: min |pred-y|/y = {min_rel_gap:.3e}, min |predict pre-activation| = "
          f"{min_pre_act:.3e}, pre-activations > 0: {int((pre > 0).sum())}/{pre.numel()}")
    print(f"torch f32 vs f64: pred {dev_pred:.3e}, loss {dev_loss:.3e}, grads max "
          f"{max(dev_grad.values()):.3e}, step losses {dev_steps:.3e}, step3 weights "
          f"{dev_final:.3e}")
    worst = sorted(dev_grad.items(), key=lambda kv: -kv[1])[:5]
    print("worst grads (f32 vs f64): " + ", ".join(f"{k} {v:.2e}" for k, v in worst))
    zero = [k for k, g in grads.items() if float(g.abs().max()) == 0.0]
    print(f"parameters with an all-zero gradient: {zero}")
    print(f"{args.out}: {os.path.getsize(args.out)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
