#!/usr/bin/python3
# PyTorch reference of the two pre-training autoencoders of docs/model-spec.md §8
# (computation-vector AE, §8.1; access-matrix LSTM AE, §8.2), written from the spec with lcm's
# parameter names, plus their input assembly (§3.10 thresholding). Used by
# make_autoencoder_fixture.py.
"""PyTorch reference of the model-spec §8 autoencoders.

Run directly to print the parameter counts of the release sizes (model-spec §8.1: encoder
591,912, decoder 2,896,636; §8.2: encoder 20,480, decoder 451,264).
"""
import sys

import torch
from torch import nn
from torch.nn import functional as F

COMP_WIDTH = 910
EXPR_STEPS, EXPR_WIDTH = 66, 11
COMP_AE_WIDTH = COMP_WIDTH + EXPR_STEPS * EXPR_WIDTH  # 1636
ACCESS_STEPS, ACCESS_WIDTH = 16, 44


def log10_threshold(x):
    """model-spec §3.10: x if |x| < 10 else sign(x)·log10(|x|)."""
    return torch.where(x.abs() >= 10, torch.sign(x) * torch.log10(x.abs().clamp(min=1e-30)), x)


def comp_ae_input(comp, expr):
    """comp [N, 910], expr [N, 66, 11] → [N, 1636] thresholded (model-spec §8.1)."""
    return log10_threshold(torch.cat([comp, expr.reshape(comp.shape[0], -1)], 1))


def access_ae_input(comp):
    """comp [N, 910] → [N, 16, 44]: step 0 = [-1, columns 207–249], steps 1–15 = columns 250–909
    as 15 × 44 (model-spec §8.2)."""
    n = comp.shape[0]
    write = torch.cat([-torch.ones(n, 1, dtype=comp.dtype), comp[:, 207:250]], 1)
    return torch.cat([write.unsqueeze(1), comp[:, 250:910].reshape(n, 15, 44)], 1)


class CompVectorEncoder(nn.Module):
    """model-spec §8.1 encoder: 1636 → embedding (350), intended per-sample BiLSTM concat (Q7)."""

    def __init__(self, first=15, tags_hidden=100, domain=50, write=20, read=20, reads=150,
                 expr_hidden=100, bottleneck_hidden=450, embedding=350):
        super().__init__()
        self.first_part = nn.Linear(33, first)
        self.encode_vectors = nn.Linear(16, 16)
        self.transformation_vectors_embed = nn.LSTM(16, tags_hidden, batch_first=True,
                                                    bidirectional=True)
        self.domain = nn.Linear(110, domain)
        self.write_access = nn.Linear(43, write)
        self.read_access = nn.Linear(44, read)
        self.read_accesses = nn.Linear(15 * read, reads)
        self.exprs_embed = nn.LSTM(EXPR_WIDTH, expr_hidden, batch_first=True)
        concat = first + 2 * tags_hidden + domain + write + reads + expr_hidden
        self.bottleneck = nn.ModuleList([nn.Linear(concat, bottleneck_hidden),
                                         nn.Linear(bottleneck_hidden, embedding)])

    def forward(self, x):
        n = x.shape[0]
        first = self.first_part(x[:, :33])
        tags = torch.cat([x[:, 33:97].reshape(n, 4, 16), x.new_zeros(n, 5, 16)], 1)  # 9 steps
        _, (h, _) = self.transformation_vectors_embed(self.encode_vectors(tags))
        tags = h.permute(1, 0, 2).reshape(n, -1)  # per sample [forward | backward]
        domain = self.domain(x[:, 97:207])
        write = self.write_access(x[:, 207:250])
        reads = self.read_access(x[:, 250:910].reshape(n, 15, 44)).reshape(n, -1)
        reads = self.read_accesses(reads)
        _, (he, _) = self.exprs_embed(x[:, 910:].reshape(n, EXPR_STEPS, EXPR_WIDTH))
        h = torch.cat([first, tags, domain, write, reads, he[0]], 1)
        h = F.dropout(F.elu(self.bottleneck[0](h)), 0.1, self.training)
        return F.dropout(self.bottleneck[1](h), 0.05, self.training)


class CompVectorAutoencoder(nn.Module):
    """model-spec §8.1: encoder, then decoder embedding → 600 → 1200 → 1636 (ELU, Dropout 0.05)."""

    def __init__(self, decoder_hidden0=600, decoder_hidden1=1200, **enc):
        super().__init__()
        self.encoder = CompVectorEncoder(**enc)
        emb = self.encoder.bottleneck[1].out_features
        self.decoder = nn.ModuleList([nn.Linear(emb, decoder_hidden0),
                                      nn.Linear(decoder_hidden0, decoder_hidden1),
                                      nn.Linear(decoder_hidden1, COMP_AE_WIDTH)])

    def forward(self, x):
        h = self.encoder(x)
        for layer in self.decoder[:2]:
            h = F.dropout(F.elu(layer(h)), 0.05, self.training)
        return self.decoder[2](h)


class AccessAutoencoder(nn.Module):
    """model-spec §8.2: 2-layer BiLSTM(44 → hidden), output sequence flattened (16·2·hidden),
    Dropout(0.05), Linear → 704. Parameter names = the published [PAM] weights."""

    def __init__(self, hidden=20):
        super().__init__()
        self.encoder = nn.LSTM(ACCESS_WIDTH, hidden, num_layers=2, batch_first=True,
                               bidirectional=True)
        self.decoder = nn.Linear(ACCESS_STEPS * 2 * hidden, ACCESS_STEPS * ACCESS_WIDTH)

    def encode(self, x):
        out, _ = self.encoder(x.reshape(x.shape[0], ACCESS_STEPS, ACCESS_WIDTH))
        return out.reshape(x.shape[0], -1)

    def forward(self, x):
        return self.decoder(F.dropout(self.encode(x), 0.05, self.training))


class EncoderLooperModel(nn.Module):
    """The cost model of model-spec §5 with a §8 encoder in place of the tag BiLSTM and the
    expression LSTM (lcm's model.encoder): comp_vector: thresholded 1636-vector → encoder → MLP;
    access_matrix: [columns 0–206 | encoder output sequence | raw expression] → MLP. `base` is a
    looper_model.LooperModel whose encode_vectors / transformation_vectors_embed / exprs_embed are
    dropped and whose first computation layer is re-made for the new width (Xavier, §5.3)."""

    def __init__(self, base, kind, **enc_sizes):
        super().__init__()
        self.base = base
        self.kind = kind
        del base.encode_vectors, base.transformation_vectors_embed, base.exprs_embed
        if kind == "comp_vector":
            self.encoder = CompVectorEncoder(**enc_sizes)
            width = self.encoder.bottleneck[1].out_features
        else:
            self.encoder = AccessAutoencoder(**enc_sizes).encoder
            width = 207 + ACCESS_STEPS * 2 * self.encoder.hidden_size + EXPR_STEPS * EXPR_WIDTH
        first = nn.Linear(width, base.comp_embedding_layers[0].out_features)
        nn.init.xavier_uniform_(first.weight)
        base.comp_embedding_layers[0] = first
        base.embed_computations = self.embed_computations

    def embed_computations(self, comp, expr):
        b, c, _ = comp.shape
        flat = comp.reshape(b * c, COMP_WIDTH)
        ex = expr.reshape(b * c, EXPR_STEPS, EXPR_WIDTH)
        if self.kind == "comp_vector":
            # thresholded in float32 as lcm stores its inputs, then the model's dtype
            x = comp_ae_input(flat.float(), ex.float()).to(comp.dtype)
            z = self.encoder(x)
        else:
            out, _ = self.encoder(access_ae_input(flat))
            z = torch.cat([flat[:, :207], out.reshape(b * c, -1), ex.reshape(b * c, -1)], 1)
        return self.base._mlp(self.base.comp_embedding_layers, z.reshape(b, c, -1))

    def forward(self, comp, loops, expr, tree):
        return self.base(comp, loops, expr, tree)

    def lcm_state_dict(self):
        """Parameters under lcm's names (the cost model's own names; encoder.* for the encoder)."""
        out = {k: v for k, v in self.base.state_dict().items()}
        prefix = "encoder." if self.kind == "comp_vector" else "encoder."
        for k, v in self.encoder.state_dict().items():
            out[prefix + k] = v
        return out


def count(module):
    return sum(p.numel() for p in module.parameters())


if __name__ == "__main__":
    c = CompVectorAutoencoder()
    a = AccessAutoencoder()
    print(f"comp_vector: encoder {count(c.encoder):,} decoder {count(c.decoder):,}")
    print(f"access_matrix: encoder {count(a.encoder):,} decoder {count(a.decoder):,}")
    ok = (count(c.encoder), count(c.decoder), count(a.encoder), count(a.decoder)) == \
        (591912, 2896636, 20480, 451264)
    sys.exit(0 if ok else 1)
