#!/usr/bin/python3
# PyTorch reference of the LOOPer recursive tree-LSTM cost model (docs/model-spec.md §5), written
# from the spec, with the reference's parameter names, plus a reader for the batches that
# bench/bench_export_batch writes. Used by make_model_fixture.py and bench_reference.py.
"""PyTorch reference of the LOOPer cost model (model-spec §3.9, §5, §6).

Run directly to print and check the parameter count of the release configuration:
    /usr/bin/python3 bench/reference/looper_model.py      # 2,109,623 parameters (model-spec §5.2)
"""
import json
import struct
import sys

import numpy as np
import torch
from torch import nn

# model-spec §3.9: column ranges of the 910-wide computation vector
FIRST_PART = 33          # columns 0–32
VECTORS_BEGIN, VECTORS_END = 33, 97   # 4 tag vectors of 16 (§3.4)
N_VECTORS, VECTOR_WIDTH = 4, 16
COMP_VECTOR_WIDTH = 910
EXPR_STEPS, EXPR_WIDTH = 66, 11       # §3.7
RELEASE_PARAMETERS = 2109623          # model-spec §5.2


def mape_loss(pred, target, weight=1.0):
    """model-spec §6: 100 · mean_i |y_i − ŷ_i| / (y_i + 1e-5), times weight = batch_len/batch_size.
    pred, target: [B]; returns a scalar tensor."""
    return 100.0 * torch.mean(torch.abs(target - pred) / (target + 1e-5)) * weight


class LooperModel(nn.Module):
    """The recursive LSTM cost model of model-spec §5 (reference class Model_Recursive_LSTM_v2).

    Sizes (model-spec §5.1 release values as defaults):
      input_size: width of [first part | third part] of the computation vector (846 = 33 + 813)
      comp_embed_layer_sizes: widths of the computation MLP; its last entry E is the embedding
        size of every tree LSTM; concat_layers are (2E + loops) → sizes[-2] → sizes[-1] and
        regression_layers E → sizes[-2] → sizes[-1] (the reference derives both from this list)
      drops: dropout probability per layer index i (comp MLP layer i, concat/regression layer i)
      lstm_embedding_size: hidden size per direction of the tag-vector BiLSTM
      expr_embed_size: hidden size of the expression LSTM
      loops_tensor_size: width of a loop vector (8, §3.8)
      zero_concat: overwrite the concat_layers weights with zeros after Xavier init (§5.3, faithful)
    """

    def __init__(self, input_size=846, comp_embed_layer_sizes=(600, 350, 200, 180),
                 drops=(0.05, 0.05, 0.05, 0.05, 0.05), lstm_embedding_size=100,
                 expr_embed_size=100, loops_tensor_size=8, zero_concat=True):
        super().__init__()
        sizes = list(comp_embed_layer_sizes)
        assert len(sizes) >= 2, "comp_embed_layer_sizes needs at least 2 entries"
        self.sizes = sizes
        self.drops = list(drops)
        assert len(self.drops) >= len(sizes), "one dropout probability per computation layer"
        emb = sizes[-1]
        self.embedding_size = emb
        # §5.2: encode_vectors (16→16), tag BiLSTM, expression LSTM
        self.encode_vectors = nn.Linear(VECTOR_WIDTH, VECTOR_WIDTH)
        self.transformation_vectors_embed = nn.LSTM(VECTOR_WIDTH, lstm_embedding_size,
                                                    num_layers=1, batch_first=True,
                                                    bidirectional=True)
        self.exprs_embed = nn.LSTM(EXPR_WIDTH, expr_embed_size, num_layers=1, batch_first=True)
        # computation MLP: (input + 2·lstm + expr) → sizes[0] → ... → sizes[-1]
        widths = [input_size + 2 * lstm_embedding_size + expr_embed_size] + sizes
        self.comp_embedding_layers = nn.ModuleList()
        for i in range(len(sizes)):
            layer = nn.Linear(widths[i], widths[i + 1])
            nn.init.xavier_uniform_(layer.weight)       # §5.3 (bias: PyTorch default)
            self.comp_embedding_layers.append(layer)
        self.comps_lstm = nn.LSTM(emb, emb, batch_first=True)
        self.nodes_lstm = nn.LSTM(emb, emb, batch_first=True)
        self.roots_lstm = nn.LSTM(emb, emb, batch_first=True)
        concat_widths = [2 * emb + loops_tensor_size] + sizes[-2:]
        self.concat_layers = nn.ModuleList()
        for i in range(len(concat_widths) - 1):
            layer = nn.Linear(concat_widths[i], concat_widths[i + 1])
            nn.init.xavier_uniform_(layer.weight)
            if zero_concat:
                nn.init.zeros_(layer.weight)             # §5.3: concat weights start at 0
            self.concat_layers.append(layer)
        regression_widths = [emb] + sizes[-2:]
        self.regression_layers = nn.ModuleList()
        for i in range(len(regression_widths) - 1):
            layer = nn.Linear(regression_widths[i], regression_widths[i + 1])
            nn.init.xavier_uniform_(layer.weight)
            self.regression_layers.append(layer)
        self.predict = nn.Linear(emb, 1)
        nn.init.xavier_uniform_(self.predict.weight)
        # §5.3: Xavier on a 1×E tensor (fan_in E, fan_out 1)
        self.no_comps_tensor = nn.Parameter(nn.init.xavier_uniform_(torch.zeros(1, emb)))
        self.no_nodes_tensor = nn.Parameter(nn.init.xavier_uniform_(torch.zeros(1, emb)))

    # ---- helpers ---------------------------------------------------------------------------
    def _mlp(self, layers, x, first_drop=0):
        """Linear → ELU(1) → Dropout(drops[first_drop + i]) for each layer (inverted dropout,
        identity in eval mode or with p = 0)."""
        for i, layer in enumerate(layers):
            x = nn.functional.elu(layer(x), alpha=1.0)
            x = nn.functional.dropout(x, p=self.drops[first_drop + i], training=self.training)
        return x

    @staticmethod
    def _last_hidden(lstm, seq):
        """Final hidden state of a batch-first LSTM over seq [N, T, in], as [N, dirs·H]
        (BiLSTM: [forward h after step T−1 ; backward h after step 0], §5.2)."""
        _, (h_n, _) = lstm(seq)                       # h_n [dirs, N, H]
        return h_n.permute(1, 0, 2).reshape(seq.shape[0], -1)

    def embed_computations(self, comp, expr):
        """Steps 1–4 of §5.4. comp [B, C, 910], expr [B, C, 66, 11] → X [B, C, E]."""
        b, c, _ = comp.shape
        first = comp[:, :, :FIRST_PART]
        vectors = comp[:, :, VECTORS_BEGIN:VECTORS_END].reshape(b * c, N_VECTORS, VECTOR_WIDTH)
        third = comp[:, :, VECTORS_END:]
        e = self._last_hidden(self.exprs_embed, expr.reshape(b * c, EXPR_STEPS, EXPR_WIDTH))
        p = self._last_hidden(self.transformation_vectors_embed, self.encode_vectors(vectors))
        z0 = torch.cat((first, p.reshape(b, c, -1), third, e.reshape(b, c, -1)), dim=2)
        return self._mlp(self.comp_embedding_layers, z0)

    def node_embedding(self, tree, n, x, loops):
        """NodeEmb of §5.4 step 5 for node index n: returns [B, 1, E]."""
        node = tree["nodes"][n]
        b = x.shape[0]
        if node["children"]:
            seq = torch.cat([self.node_embedding(tree, ch, x, loops) for ch in node["children"]],
                            dim=1)
            h_nodes = self._last_hidden(self.nodes_lstm, seq).unsqueeze(1)
        else:
            h_nodes = self.no_nodes_tensor.unsqueeze(0).expand(b, -1, -1)
        if node["comp_indices"]:
            idx = torch.tensor(node["comp_indices"], dtype=torch.long, device=x.device)
            h_comps = self._last_hidden(self.comps_lstm, x.index_select(1, idx)).unsqueeze(1)
        else:
            h_comps = self.no_comps_tensor.unsqueeze(0).expand(b, -1, -1)
        loop = loops[:, node["loop_index"]:node["loop_index"] + 1, :]
        return self._mlp(self.concat_layers, torch.cat((h_nodes, h_comps, loop), dim=2))

    def forward(self, comp, loops, expr, tree):
        """Predicted speedups [B] (§5.4). comp [B, C, 910], loops [B, L, 8], expr [B, C, 66, 11];
        tree = {"nodes": [{"loop_index", "comp_indices", "children"}], "roots": [...]}."""
        x = self.embed_computations(comp, expr)
        roots = torch.cat([self.node_embedding(tree, r, x, loops) for r in tree["roots"]], dim=1)
        h = self._last_hidden(self.roots_lstm, roots).unsqueeze(1)      # [B, 1, E]
        h = self._mlp(self.regression_layers, h)
        out = self.predict(h)                                            # [B, 1, 1]
        return nn.functional.leaky_relu(out[:, 0, 0], negative_slope=0.01)


def count_parameters(model):
    """Number of trainable scalars."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---- safetensors batch reader ---------------------------------------------------------------
NP_DTYPE = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4", "U8": "u1"}


def read_safetensors(path):
    """Reads a safetensors file → ({name: np.ndarray}, metadata dict). Raises ValueError on a
    dtype this reader does not know."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, h in header.items():
        if h["dtype"] not in NP_DTYPE:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {h['dtype']}")
        b, e = h["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=NP_DTYPE[h["dtype"]]).reshape(h["shape"]).copy()
    return out, meta


def tree_from_tensors(t):
    """The tree dict of a batch file (CSR tensors tree.* written by bench_export_batch)."""
    li, co, ci = t["tree.loop_index"], t["tree.comp_offsets"], t["tree.comp_indices"]
    ho, hc = t["tree.child_offsets"], t["tree.children"]
    nodes = [{"loop_index": int(li[i]),
              "comp_indices": [int(v) for v in ci[co[i]:co[i + 1]]],
              "children": [int(v) for v in hc[ho[i]:ho[i + 1]]]} for i in range(len(li))]
    return {"nodes": nodes, "roots": [int(v) for v in t["tree.roots"]]}


def load_batch(path, dtype=torch.float32):
    """A batch file → (comp, loops, expr, speedup tensors in dtype, tree dict, metadata)."""
    t, meta = read_safetensors(path)
    conv = lambda k: torch.from_numpy(t[k]).to(dtype)  # noqa: E731
    return conv("comp"), conv("loops"), conv("expr"), conv("speedup"), tree_from_tensors(t), meta


def main():
    """Prints the parameter count of the release configuration and checks it (model-spec §5.2)."""
    torch.manual_seed(0)
    model = LooperModel()
    n = count_parameters(model)
    print(f"LooperModel release config: {n:,} parameters")
    for name, p in model.named_parameters():
        print(f"  {name:45s} {list(p.shape)}")
    assert n == RELEASE_PARAMETERS, f"expected {RELEASE_PARAMETERS:,} parameters, got {n:,}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
