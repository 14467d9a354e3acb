#!/usr/bin/python3
# Writes tests/fixtures/encoder_model_golden.safetensors: PyTorch predictions, MAPE loss and every
# parameter gradient of the cost model with each docs/model-spec.md §8 encoder (reduced sizes) on
# the real batch tests/fixtures/model_batch_input.safetensors, for tests/test_encoder_model.cpp.
"""Golden values of the cost model with a pre-trained encoder (model-spec §5 + §8).

Run: /usr/bin/python3 bench/reference/make_encoder_model_fixture.py
Weights drawn in float32 (torch.manual_seed(0); concat layers not zeroed and predict.bias = 0.5,
as make_model_fixture.py) stored as F32 under "<kind>.<lcm name>"; in float64 from those:
"<kind>.pred" [B], "<kind>.loss" (MAPE, weight 1), "<kind>.grad.<name>"; dropout off.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from autoencoder_model import EncoderLooperModel  # noqa: E402
from looper_model import LooperModel, load_batch, mape_loss  # noqa: E402
from make_fixtures import f32, f64, write_safetensors  # noqa: E402

SIZES = dict(input_size=846, comp_embed_layer_sizes=[16, 12, 10, 8], drops=[0.0] * 5,
             lstm_embedding_size=4, expr_embed_size=4, loops_tensor_size=8, zero_concat=False)
ENC = {"comp_vector": dict(first=5, tags_hidden=6, domain=7, write=4, read=3, reads=8, expr_hidden=6,
                           bottleneck_hidden=20, embedding=12),
       "access_matrix": dict(hidden=2)}


def build(kind, dtype):
    torch.manual_seed(0)
    m = EncoderLooperModel(LooperModel(**SIZES), kind, **ENC[kind])
    with torch.no_grad():
        m.base.predict.weight.mul_(0.1)  # predictions near 1: LeakyReLU's linear branch,
        m.base.predict.bias.fill_(1.0)   # on both sides of the targets
    return m.to(dtype)


def main():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out_path = os.path.join(repo, "tests", "fixtures", "encoder_model_golden.safetensors")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    comp, loops, expr, y, tree, _ = load_batch(os.path.join(repo, "tests", "fixtures", "model_batch_input.safetensors"),
                                               torch.float64)
    out = {}
    meta = {"format": "pt", "generator": "bench/reference/make_encoder_model_fixture.py",
            "torch_version": torch.__version__,
            "comp_embed_layer_sizes": ",".join(map(str, SIZES["comp_embed_layer_sizes"])),
            "lstm_embedding_size": str(SIZES["lstm_embedding_size"]),
            "expr_embed_size": str(SIZES["expr_embed_size"])}
    for kind in ENC:
        m32 = build(kind, torch.float32)
        init = {k: v.detach().clone() for k, v in m32.lcm_state_dict().items()}
        m = build(kind, torch.float64)
        m.load_state_dict({k: v.double() for k, v in m32.state_dict().items()})
        m.eval()
        pred = m(comp, loops, expr, tree)
        loss = mape_loss(pred, y, 1.0)
        loss.backward()
        grads = {}
        lcm_names = list(init.keys())
        params = dict(m.base.named_parameters())
        params.update({"encoder." + k: p for k, p in m.encoder.named_parameters()})
        for k in lcm_names:
            out[f"{kind}.{k}"] = f32(init[k])
            out[f"{kind}.grad.{k}"] = f64(params[k].grad)
        out[f"{kind}.pred"] = f64(pred.detach())
        out[f"{kind}.loss"] = f64(loss.detach()).reshape(())
        meta[f"{kind}.n_parameters"] = str(sum(v.numel() for v in init.values()))
        zero = [k for k in lcm_names if float(params[k].grad.abs().max()) == 0.0]
        print(f"{kind}: pred[:4] {pred[:4].tolist()}, min pre-activation sign ok: {bool((pred > 0).all())}")
        print(f"{kind}: loss {loss.item():.10g}, {meta[kind + '.n_parameters']} parameters, zero grads {zero}")
    write_safetensors(out_path, out, meta)
    print(f"{out_path}: {os.path.getsize(out_path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
