#!/usr/bin/python3
"""Makes the PyTorch reference files that tests/test_reference.cpp compares Scratchformer against.

Run from the repository root with Debian's python3-torch (the system interpreter):

    /usr/bin/python3 tools/make_reference.py                   # every case
    /usr/bin/python3 tools/make_reference.py decoder_only_lm   # only the cases named

It writes tests/data/reference/*.safetensors (committed; the C++ tests need no Python). Each file
holds, for one small module or model built here in PyTorch:

    the inputs              "x", "src", "tgt_in", ... (float32 or int64)
    the weights             under Scratchformer's parameter names ("q_proj.weight",
                            "encoder.layers.0.self_attn.q_proj.weight", ...), float32
    the outputs             "out", "weights", "logits", "loss", ...
    every gradient          "grad.<input or parameter name>"
    __metadata__            the configuration, as strings (the test builds the same module from it)

Weights and inputs are drawn in float32 and saved as float32; PyTorch then runs the module in
float64 on exactly those values, so the saved outputs and gradients (float64) are the exact answer
up to float64 rounding. The C++ test runs the module twice: in float64 (must agree to rounding)
and in float32 (the required bound: relative error <= 1e-4).

Cases (one file each):
    attention_self     torch.nn.MultiheadAttention, self-attention with a key padding mask
    attention_cross    the same module, queries and keys/values of different lengths
    attention_causal   self-attention with a causal mask and a key padding mask
    layer_norm         torch.nn.LayerNorm
    seq2seq_pre_ln     the encoder-decoder of tools/torch_model.py (Seq2SeqTransformer, the one PyTorch
                       model definition of the project), pre-LN, shared and tied embeddings, ReLU;
                       logits, label-smoothed cross-entropy and every parameter gradient. Its weights
                       are drawn on a model built from torch.nn.TransformerEncoderLayer /
                       TransformerDecoderLayer (norm_first=True), which must give the same logits and
                       gradients (asserted to float64 rounding)
    seq2seq_post_ln    the same with norm_first=False (the paper's post-LN), separate source and
                       target embeddings, an output projection, and GELU
    decoder_only_lm    the decoder-only language model of tools/torch_model.py (DecoderOnlyTransformer,
                       GPT's shape): pre-LN causal blocks with grouped-query attention, GELU, a final
                       LayerNorm and the LM head tied to the embedding; make_lm_batch's rows, two
                       padded; logits, label-smoothed cross-entropy and every parameter gradient. The
                       same weights run through torch.nn.TransformerEncoderLayer (each k/v head's
                       projection repeated for its query heads) must give the same logits and gradients
    recurrent_rnn      torch.nn.RNN (tanh), GRU and LSTM: two layers, bidirectional, on a padded batch
    recurrent_gru      read through pack_padded_sequence; outputs, final states (h_n, c_n), the input's
    recurrent_lstm     and every weight's gradient
    rnn_seq2seq_additive  the recurrent encoder-decoder of tools/torch_model.py (RnnSeq2Seq, on
    rnn_seq2seq_dot       torch.nn.LSTM / GRU): a bidirectional two-layer encoder read through
    rnn_seq2seq_general   pack_padded_sequence, the bridge, a two-layer decoder stepped one token at a
    rnn_seq2seq_none      time with Bahdanau's additive attention (LSTM), Luong's dot (GRU) or general
                          (LSTM) attention, or none (LSTM, the fixed-vector bottleneck); three source
                          rows of different lengths; logits, label-smoothed cross-entropy and every
                          parameter gradient. For dot, general and none the same weights also run with
                          the decoder over the whole target in one call and the attention batched over
                          the positions, which must give the same logits and gradients

The safetensors files are written by tools/torch_model.py's write_safetensors (8-byte little-endian
header length, JSON header, raw little-endian data, the FNV-1a checksum train/checkpoint/safetensors.h checks),
so no extra Python package is needed. Re-running gives byte-identical files with the same torch version.
"""

import copy
import dataclasses
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402  (the model, the layers and the safetensors writer)

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "reference")


def save_safetensors(path, tensors, metadata):
    """tensors: list of (name, tensor) in file order; metadata: dict of str -> str (the checksum added)."""
    size = tm.write_safetensors(path, tensors, metadata)
    print(f"wrote {os.path.relpath(path)}: {len(tensors)} tensors, {size} bytes")


def common_metadata(case):
    return {"case": case, "generator": "tools/make_reference.py", "torch_version": torch.__version__,
            "reference_dtype": "float64"}


# ---------------------------------------------------------------------------------------------
# Drawing weights: float32 values (so the C++ float32 run starts from exactly these weights)
# ---------------------------------------------------------------------------------------------

def f32_randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def randomise_(module):
    """Redraws every parameter so no gradient is trivially zero or one: weights Xavier-uniform,
    biases N(0, 0.1^2), norm weights 1 + N(0, 0.2^2), norm biases N(0, 0.2^2). Embeddings are left
    to the caller. Values are float32 (then copied into the module's dtype)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "embed" in name:
                continue
            if p.dim() == 2:
                fan_out, fan_in = p.shape
                a = math.sqrt(6.0 / (fan_in + fan_out))
                v = torch.rand(p.shape, dtype=torch.float32) * (2 * a) - a
            elif "norm" in name and name.endswith("weight"):
                v = 1.0 + 0.2 * f32_randn(*p.shape)
            elif "norm" in name:
                v = 0.2 * f32_randn(*p.shape)
            else:
                v = 0.1 * f32_randn(*p.shape)
            p.copy_(v)


def f32(t):
    """float32 copy, checking that nothing is lost (all weights and inputs start as float32)."""
    out = t.detach().to(torch.float32)
    assert torch.equal(out.to(t.dtype), t.detach()), "value is not exactly representable in float32"
    return out


# ---------------------------------------------------------------------------------------------
# Name mapping: PyTorch module names -> Scratchformer parameter names
# ---------------------------------------------------------------------------------------------

def split_in_proj(prefix, name, t):
    """torch.nn.MultiheadAttention packs q, k, v into in_proj_weight (3D, D) / in_proj_bias (3D);
    Scratchformer has q_proj, k_proj, v_proj (D, D) / (D). Returns [(scratchformer name, tensor)]."""
    kind = "weight" if name.endswith("in_proj_weight") else "bias"
    q, k, v = t.chunk(3, dim=0)
    return [(f"{prefix}q_proj.{kind}", q), (f"{prefix}k_proj.{kind}", k), (f"{prefix}v_proj.{kind}", v)]


# Module names that differ: torch.nn.TransformerDecoderLayer.multihead_attn is our cross_attn; its
# linear1 / linear2 are our ffn.fc1 / ffn.fc2.
RENAMES = [(".multihead_attn.", ".cross_attn."), (".linear1.", ".ffn.fc1."), (".linear2.", ".ffn.fc2.")]


def scratchformer_named(named):
    """[(torch name, tensor)] -> [(scratchformer name, tensor)]."""
    out = []
    for name, t in named:
        for old, new in RENAMES:
            name = name.replace(old, new)
        if name.endswith("in_proj_weight") or name.endswith("in_proj_bias"):
            out.extend(split_in_proj(name[: name.rfind("in_proj_")], name, t))
        else:
            out.append((name, t))
    return out


def weights_and_grads(module):
    """-> ([(name, float32 weight)], [("grad.<name>", float64 gradient)]) under our names."""
    named = list(module.named_parameters())  # a shared parameter is listed once, first name
    weights = [(n, f32(t)) for n, t in scratchformer_named(named)]
    grads = []
    for n, p in named:
        assert p.grad is not None, f"{n} got no gradient"
    for n, g in scratchformer_named([(n, p.grad) for n, p in named]):
        grads.append(("grad." + n, g.to(torch.float64)))
    return weights, grads


# ---------------------------------------------------------------------------------------------
# Case 1: MultiHeadAttention against torch.nn.MultiheadAttention
# ---------------------------------------------------------------------------------------------

def attention_case(case, seed, t_q, t_k, cross, causal):
    """Self-attention (x_q = x_kv) or cross-attention, with a key padding mask (batch row 1 has its
    last two keys padded) and optionally a causal mask. Backpropagates sum(out * grad_out)."""
    torch.manual_seed(seed)
    D, H, B = 16, 4, 2
    mha = nn.MultiheadAttention(D, H, dropout=0.0, bias=True, batch_first=True)
    randomise_(mha)
    mha.double()

    x_q = f32_randn(B, t_q, D)
    x_kv = f32_randn(B, t_k, D) if cross else x_q
    grad_out = f32_randn(B, t_q, D)
    key_padding = torch.zeros(B, t_k, dtype=torch.bool)  # True = ignore this key (ours: TRUE = BLOCKED)
    key_padding[1, t_k - 2:] = True
    attn_mask = torch.triu(torch.ones(t_q, t_k, dtype=torch.bool), diagonal=1) if causal else None
    # What our MultiHeadAttention takes: one mask, TRUE = BLOCKED, broadcast to (B,H,Tq,Tk).
    blocked = key_padding[:, None, None, :].expand(B, 1, t_q, t_k)
    if causal:
        blocked = blocked | attn_mask[None, None]
    assert not blocked.all(dim=-1).any(), "every query must see at least one key"

    q64 = x_q.double().requires_grad_()
    kv64 = x_kv.double().requires_grad_() if cross else q64
    out, weights = mha(q64, kv64, kv64, key_padding_mask=key_padding, attn_mask=attn_mask,
                       need_weights=True, average_attn_weights=False)  # (B,Tq,D), (B,H,Tq,Tk)
    (out * grad_out.double()).sum().backward()

    w, g = weights_and_grads(mha)
    tensors = [("x_q", x_q)] + ([("x_kv", x_kv)] if cross else [])
    tensors += [("mask", blocked.to(torch.int64)), ("grad_out", grad_out)] + w
    tensors += [("out", out.detach()), ("weights", weights.detach()), ("grad.x_q", q64.grad)]
    if cross:
        tensors.append(("grad.x_kv", kv64.grad))
    tensors += g
    meta = common_metadata(case)
    meta.update({"d_model": D, "n_heads": H, "cross": int(cross), "causal": int(causal),
                 "loss": "sum(out * grad_out)"})
    save_safetensors(os.path.join(OUT_DIR, case + ".safetensors"), tensors, meta)


# ---------------------------------------------------------------------------------------------
# Case 2: LayerNorm against torch.nn.LayerNorm
# ---------------------------------------------------------------------------------------------

def layer_norm_case():
    torch.manual_seed(4)
    B, T, D, eps = 2, 5, 16, 1e-5
    ln = nn.LayerNorm(D, eps=eps)
    with torch.no_grad():
        ln.weight.copy_(1.0 + 0.2 * f32_randn(D))
        ln.bias.copy_(0.2 * f32_randn(D))
    ln.double()
    # Rows with different means and scales, one nearly constant (variance << eps matters).
    x = f32_randn(B, T, D) * 2.0 + 0.5
    x[1, 3] = 3.0 + 1e-3 * f32_randn(D)
    grad_out = f32_randn(B, T, D)
    x64 = x.double().requires_grad_()
    y = ln(x64)
    (y * grad_out.double()).sum().backward()
    w, g = weights_and_grads(ln)
    tensors = [("x", x), ("grad_out", grad_out)] + w + [("out", y.detach()), ("grad.x", x64.grad)] + g
    meta = common_metadata("layer_norm")
    meta.update({"dim": D, "eps": repr(eps), "loss": "sum(out * grad_out)"})
    save_safetensors(os.path.join(OUT_DIR, "layer_norm.safetensors"), tensors, meta)


# ---------------------------------------------------------------------------------------------
# Cases 3 and 4: the models of tools/torch_model.py, checked against torch.nn's Transformer layers
# ---------------------------------------------------------------------------------------------

def model_config(cfg):
    """A case's cfg dict -> tm.ModelConfig (the hyper-parameters; dropout, label smoothing and the
    like stay in the dict)."""
    fields = {f.name for f in dataclasses.fields(tm.ModelConfig)}
    config = tm.ModelConfig(**{k: v for k, v in cfg.items() if k in fields})
    config.validate()
    return config


def smoothed_cross_entropy_backward(logits, tgt_out, cfg):
    """logits (B,T,V), tgt_out (B,T) -> cross-entropy (0-d), pad targets ignored, label smoothing
    cfg["label_smoothing"]; calls backward() on it."""
    V = logits.shape[-1]
    loss = F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=cfg["pad_id"],
                           label_smoothing=cfg["label_smoothing"])
    loss.backward()
    return loss


def their_grads(layers):
    """{Scratchformer name: gradient} of a model of torch.nn layers (in_proj gradients split)."""
    named = list(layers.named_parameters())
    for n, p in named:
        assert p.grad is not None, f"{n} got no gradient"
    return dict(scratchformer_named([(n, p.grad.detach()) for n, p in named]))


def named_grads(named):
    """[(name, parameter)] -> {name: its gradient}, every parameter having one."""
    named = list(named)
    for n, p in named:
        assert p.grad is not None, f"{n} got no gradient"
    return {n: p.grad.detach().clone() for n, p in named}


# How far the torch.nn layers may be from the plain model in float64: the same sums in another
# order (packed in_proj, q scaled before q k^T), so a few ulps of the largest value.
TORCH_LAYERS_FRACTION = 1e-12


def assert_same_as_torch_layers(what, logits, grads, their_logits, their_grads):
    """The plain model's logits and {name: gradient} against those of torch.nn's layers with the same
    weights: every entry within TORCH_LAYERS_FRACTION of the tensor's largest value (for a gradient
    that is zero but for rounding, such as a k_proj bias's, FLOOR_FRACTION of the case's largest
    gradient). -> the largest gap found."""
    assert grads.keys() == their_grads.keys(), f"{what}: parameters differ: {sorted(grads.keys() ^ their_grads.keys())}"
    grad_scale = max(g.abs().max().item() for g in their_grads.values())
    worst = 0.0
    for key, ours, theirs in [("logits", logits, their_logits)] + [(k, grads[k], their_grads[k]) for k in grads]:
        floor = FLOOR_FRACTION * grad_scale if key != "logits" else 0.0
        gap = (ours - theirs).abs().max().item() / max(theirs.abs().max().item(), floor)
        assert gap < TORCH_LAYERS_FRACTION, f"{what}: {key} differs from torch.nn's layers by {gap:.3g} (relative)"
        worst = max(worst, gap)
    return worst


# The test's error measure (tests/test_reference.cpp: kFloorFraction, kExactZeroFraction).
FLOOR_FRACTION = 1e-2
EXACT_ZERO_FRACTION = 1e-12


def worst_relative_error(got, ref):
    """max over tensors and elements of |got - ref| / max(|ref|, FLOOR_FRACTION * scale), scale the
    tensor's largest |ref| (the case's largest gradient for gradients that are exactly zero)."""
    grad_scale = max(t.abs().max().item() for k, t in ref.items() if k.startswith("grad."))
    worst = (0.0, "")
    for key, g in got.items():
        r = ref[key].double()
        scale = r.abs().max().item()
        if key.startswith("grad.") and scale < EXACT_ZERO_FRACTION * grad_scale:
            scale = grad_scale
        err = ((g.double() - r).abs() / r.abs().clamp(min=FLOOR_FRACTION * scale)).max().item()
        worst = max(worst, (err, key))
    return worst


def save_model_case(case, cfg, inputs, model, logits, loss, model32, loss_of):
    """Writes inputs, the weights, logits, loss and every gradient of `model` (float64, backward done),
    and prints how close PyTorch's own float32 (model32 through loss_of) gets to them."""
    w, g = weights_and_grads(model)
    tensors = inputs + w + [("logits", logits.detach()), ("loss", loss.detach())] + g
    meta = common_metadata(case)
    meta.update({k: (str(v).lower() if isinstance(v, bool) else v) for k, v in cfg.items()})
    meta["loss"] = "cross_entropy(logits, tgt_out, ignore_index=pad_id, label_smoothing)"
    save_safetensors(os.path.join(OUT_DIR, case + ".safetensors"), tensors, meta)

    # How close PyTorch's own float32 gets to these float64 references, measured as the C++ test
    # measures Scratchformer's float32 (printed for comparison; nothing is saved).
    logits32, loss32 = loss_of(model32)
    _, g32 = weights_and_grads(model32)
    got = dict([("logits", logits32.detach()), ("loss", loss32.detach())] + g32)
    err, key = worst_relative_error(got, dict(tensors))
    print(f"  PyTorch float32 vs these references: largest relative error {err:.3g} ({key})")


class TorchLayersSeq2Seq(nn.Module):
    """The check of tm.Seq2SeqTransformer: the same encoder-decoder built from PyTorch's own
    torch.nn.TransformerEncoder / TransformerDecoder (pre- or post-LN layers, final LayerNorm under
    pre-LN), source padding keys blocked in encoder self-attention and in cross-attention, a causal
    decoder self-attention; embed(ids) = E[ids] * sqrt(D) + PE[0:len]; logits = out E_tgt^T
    (tie_output) or output_proj(out). seq2seq_case draws the weights here (as the files have always
    been drawn) and copies them into the plain model by name (scratchformer_named)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        D, pre = cfg["d_model"], cfg["norm_position"] == "pre"
        pad = cfg["pad_id"]
        self.src_embed = nn.Embedding(cfg["src_vocab"], D, padding_idx=pad)
        self.tgt_embed = self.src_embed if cfg["share_embeddings"] else nn.Embedding(cfg["tgt_vocab"], D,
                                                                                      padding_idx=pad)
        enc_layer = nn.TransformerEncoderLayer(D, cfg["n_heads"], cfg["d_ff"], dropout=0.0,
                                               activation=cfg["activation"], batch_first=True, norm_first=pre)
        dec_layer = nn.TransformerDecoderLayer(D, cfg["n_heads"], cfg["d_ff"], dropout=0.0,
                                               activation=cfg["activation"], batch_first=True, norm_first=pre)
        self.encoder = nn.TransformerEncoder(enc_layer, cfg["encoder_layers"], norm=nn.LayerNorm(D) if pre else None,
                                             enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec_layer, cfg["decoder_layers"], norm=nn.LayerNorm(D) if pre else None)
        if not cfg["tie_output"]:
            self.output_proj = nn.Linear(D, cfg["tgt_vocab"], bias=False)
        self.register_buffer("pe", tm.sinusoidal_table(cfg["max_len"], D))

    def embed(self, table, ids):
        D = self.cfg["d_model"]
        return table(ids) * math.sqrt(D) + self.pe[: ids.shape[1]].to(table.weight.dtype)

    def forward(self, src, tgt_in):
        """src (B,S), tgt_in (B,T) -> logits (B,T,V)"""
        pad = self.cfg["pad_id"]
        src_padding = src == pad  # (B,S), True = ignore
        T = tgt_in.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = not allowed
        memory = self.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src_padding)
        out = self.decoder(self.embed(self.tgt_embed, tgt_in), memory, tgt_mask=causal,
                           memory_key_padding_mask=src_padding)
        if self.cfg["tie_output"]:
            return out @ self.tgt_embed.weight.t()
        return self.output_proj(out)


def seq2seq_case(case, seed, overrides):
    cfg = {"src_vocab": 11, "tgt_vocab": 11, "d_model": 16, "n_heads": 4, "n_kv_heads": 4, "d_ff": 32,
           "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0, "attention_dropout": 0.0,
           "activation": "relu", "norm": "layernorm", "norm_position": "pre", "positional": "sinusoidal",
           "share_embeddings": True, "tie_output": True, "max_len": 16, "pad_id": 0, "label_smoothing": 0.1}
    cfg.update(overrides)
    torch.manual_seed(seed)
    layers = TorchLayersSeq2Seq(cfg)
    layers.train()  # dropout is 0; training mode keeps PyTorch off its fused inference path
    randomise_(layers)
    D, pad = cfg["d_model"], cfg["pad_id"]
    with torch.no_grad():
        for emb in {id(layers.src_embed): layers.src_embed, id(layers.tgt_embed): layers.tgt_embed}.values():
            emb.weight.copy_(f32_randn(*emb.weight.shape) / math.sqrt(D))  # N(0, 1/D), as nn/init.h
            emb.weight[pad].zero_()
    assert (layers.src_embed.weight is layers.tgt_embed.weight) == cfg["share_embeddings"]
    model = tm.Seq2SeqTransformer(model_config(cfg))  # the plain model, with the same weights
    model.load_state_dict(dict(scratchformer_named(layers.named_parameters())), strict=True)
    model32 = copy.deepcopy(model)  # float32, for the tolerance measurement
    model.double()
    layers.double()

    # Tokens: 0 pad, 1 BOS, 2 EOS, 3.. words. Row 1 of the source is padded; row 1 of the target
    # too (its last position predicts pad: ignored by the loss).
    src = torch.tensor([[5, 3, 8, 6, 2], [7, 4, 2, 0, 0]], dtype=torch.int64)                # (B,S)
    tgt_in = torch.tensor([[1, 9, 4, 10], [1, 6, 3, 2]], dtype=torch.int64)                  # (B,T)
    tgt_out = torch.tensor([[9, 4, 10, 2], [6, 3, 2, 0]], dtype=torch.int64)                 # (B,T)
    assert src.max() < cfg["src_vocab"] and tgt_out.max() < cfg["tgt_vocab"]

    def loss_of(m):
        logits = m(src, tgt_in)  # (B,T,V)
        return logits, smoothed_cross_entropy_backward(logits, tgt_out, cfg)

    logits, loss = loss_of(model)
    their_logits, _ = loss_of(layers)
    gap = assert_same_as_torch_layers(case, logits.detach(), named_grads(model.named_parameters()),
                                      their_logits.detach(), their_grads(layers))
    inputs = [("src", src), ("tgt_in", tgt_in), ("tgt_out", tgt_out)]
    save_model_case(case, cfg, inputs, model, logits, loss, model32, loss_of)
    print(f"  torch.nn.TransformerEncoder/Decoder layers give the same logits and gradients to {gap:.3g}")


def repeat_kv_heads(t, n_kv_heads, groups):
    """A k_proj / v_proj weight (Hkv*Dh, D) or bias (Hkv*Dh) -> (Hkv*G*Dh, ...) = (D, ...): the rows
    of k/v head j repeated for query heads j*G .. j*G+G-1, so query head h reads k/v head h // G
    (Llama's repeat_kv, Scratchformer's repeat_kv_heads). Grouped-query attention is then ordinary
    multi-head attention whose k/v projections share weights within each group of G heads; autograd
    sums the group's gradients into the shared rows."""
    heads = t.reshape(n_kv_heads, -1, *t.shape[1:])  # (Hkv, Dh, ...)
    return heads.repeat_interleave(groups, dim=0).reshape(-1, *t.shape[1:])


def logits_through_torch_layers(model, ids):
    """ids (B,T) -> logits (B,T,V) of the decoder-only model with every block replaced by
    torch.nn.TransformerEncoderLayer(norm_first=True) run (functional_call) on the block's own
    parameters, the k/v projections repeated into the packed (3D, D) in_proj: checks the plain
    block (residuals, norm placement, GELU) and the k/v head grouping against PyTorch's own layer,
    values and gradients (they flow back into the model's parameters)."""
    cfg = model.cfg
    T = ids.shape[1]
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    h = model.embed_tokens(ids)
    for block in model.layers:
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True).to(h.dtype)
        attn, Hkv = block.self_attn, cfg.kv_heads()
        G = cfg.n_heads // Hkv
        weights = {  # q rows, then k and v rows repeated for their query heads: (3D, D) and (3D)
            "self_attn.in_proj_weight": torch.cat([attn.q_proj.weight, repeat_kv_heads(attn.k_proj.weight, Hkv, G),
                                                   repeat_kv_heads(attn.v_proj.weight, Hkv, G)]),
            "self_attn.in_proj_bias": torch.cat([attn.q_proj.bias, repeat_kv_heads(attn.k_proj.bias, Hkv, G),
                                                 repeat_kv_heads(attn.v_proj.bias, Hkv, G)]),
        }
        for ours, theirs in [(attn.out_proj, "self_attn.out_proj"), (block.ffn.fc1, "linear1"),
                             (block.ffn.fc2, "linear2"), (block.norm1, "norm1"), (block.norm2, "norm2")]:
            weights[theirs + ".weight"], weights[theirs + ".bias"] = ours.weight, ours.bias
        h = functional_call(layer, weights, (h,), {"src_mask": causal})
    return model.norm(h) @ model.embed.weight.t()


def decoder_only_case():
    case = "decoder_only_lm"
    cfg = {"arch": "decoder-only", "tgt_vocab": 13, "d_model": 16, "n_heads": 4, "n_kv_heads": 2, "d_ff": 32,
           "decoder_layers": 2, "dropout": 0.0, "attention_dropout": 0.0, "activation": "gelu",
           "norm": "layernorm", "norm_position": "pre", "positional": "sinusoidal", "max_len": 16,
           "pad_id": 0, "bos_id": 2, "label_smoothing": 0.1}
    torch.manual_seed(7)
    model = tm.DecoderOnlyTransformer(model_config(cfg))
    model.train()  # dropout is 0; as in seq2seq_case
    randomise_(model)
    D, pad = cfg["d_model"], cfg["pad_id"]
    with torch.no_grad():
        model.embed.weight.copy_(f32_randn(*model.embed.weight.shape) / math.sqrt(D))  # N(0, 1/D), as nn/init.h
        model.embed.weight[pad].zero_()
    model32 = copy.deepcopy(model)  # float32, for the tolerance measurement
    model.double()

    # make_lm_batch's rows (data/tasks.h): tgt_in = <s> x..,  tgt_out = x.. </s>, padded with 0 at
    # the end. Tokens: 0 pad, 2 <s>, 3 </s>, 4.. words. x = (5 9 4 11 7), (8 12 6), (10 4 4 9):
    # rows 1 and 2 are padded; a padded position's target is pad, ignored by the loss.
    tgt_in = torch.tensor([[2, 5, 9, 4, 11, 7], [2, 8, 12, 6, 0, 0], [2, 10, 4, 4, 9, 0]], dtype=torch.int64)  # (B,T)
    tgt_out = torch.tensor([[5, 9, 4, 11, 7, 3], [8, 12, 6, 3, 0, 0], [10, 4, 4, 9, 3, 0]], dtype=torch.int64)  # (B,T)
    assert tgt_in.max() < cfg["tgt_vocab"] and tgt_out.max() < cfg["tgt_vocab"]

    def loss_of(m):
        logits = m(tgt_in)  # (B,T,V)
        return logits, smoothed_cross_entropy_backward(logits, tgt_out, cfg)

    logits, loss = loss_of(model)
    grads = named_grads(model.named_parameters())
    model.zero_grad()
    their_logits = logits_through_torch_layers(model, tgt_in)
    smoothed_cross_entropy_backward(their_logits, tgt_out, cfg)
    gap = assert_same_as_torch_layers(case, logits.detach(), grads, their_logits.detach(),
                                      named_grads(model.named_parameters()))
    for name, p in model.named_parameters():  # the file gets the plain model's own gradients
        p.grad.copy_(grads[name])
    save_model_case(case, cfg, [("tgt_in", tgt_in), ("tgt_out", tgt_out)], model, logits, loss, model32, loss_of)
    print(f"  torch.nn.TransformerEncoderLayer blocks give the same logits and gradients to {gap:.3g}")


# ---------------------------------------------------------------------------------------------
# Cases 6-8: the recurrent layers against torch.nn.RNN / GRU / LSTM
# ---------------------------------------------------------------------------------------------

def recurrent_case(case, seed, kind):
    """torch.nn.RNN (tanh) / GRU / LSTM, two layers, bidirectional, batch_first, on a padded batch
    read through pack_padded_sequence (rows of lengths 5, 3, 2). Scratchformer's names are PyTorch's
    (weight_ih_l0, ..._reverse), so the weights are saved as they are. Backpropagates
    sum(out * grad_out) + sum(h_n * grad_h) (+ sum(c_n * grad_c) for the LSTM): every weight, the
    input and the final states get a gradient. Padded outputs are zeros, as pad_packed_sequence gives."""
    torch.manual_seed(seed)
    B, T, I, H, L = 3, 5, 4, 3, 2
    cls = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[kind]
    layer = cls(I, H, num_layers=L, bidirectional=True, batch_first=True)
    with torch.no_grad():  # PyTorch's own U(-1/sqrt(H), 1/sqrt(H)), redrawn as float32 values
        for p in layer.parameters():
            p.copy_((torch.rand(p.shape, dtype=torch.float32) * 2 - 1) / math.sqrt(H))
    layer.double()
    lengths = torch.tensor([5, 3, 2])
    x = f32_randn(B, T, I)
    pad = torch.arange(T)[None, :] >= lengths[:, None]  # (B, T), True at padding
    x[pad] = 0.0  # what a padded embedding row looks like; the layer must not read it anyway
    grad_out = f32_randn(B, T, 2 * H)
    grad_h = f32_randn(2 * L, B, H)
    grad_c = f32_randn(2 * L, B, H)
    x64 = x.double().requires_grad_()
    packed = nn.utils.rnn.pack_padded_sequence(x64, lengths, batch_first=True, enforce_sorted=False)
    out_packed, state = layer(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out_packed, batch_first=True, total_length=T)
    h_n, c_n = (state if kind == "lstm" else (state, None))
    loss = (out * grad_out.double()).sum() + (h_n * grad_h.double()).sum()
    if c_n is not None:
        loss = loss + (c_n * grad_c.double()).sum()
    loss.backward()
    w, g = weights_and_grads(layer)
    tensors = [("x", x), ("pad", pad.to(torch.int64)), ("grad_out", grad_out), ("grad_h", grad_h)]
    tensors += [("grad_c", grad_c)] if c_n is not None else []
    tensors += w + [("out", out.detach()), ("h_n", h_n.detach())]
    tensors += [("c_n", c_n.detach())] if c_n is not None else []
    tensors += [("grad.x", x64.grad)] + g
    meta = common_metadata(case)
    meta.update({"cell": kind, "input_size": I, "hidden_size": H, "num_layers": L, "bidirectional": 1,
                 "loss": "sum(out * grad_out) + sum(h_n * grad_h) [+ sum(c_n * grad_c)]"})
    save_safetensors(os.path.join(OUT_DIR, case + ".safetensors"), tensors, meta)


# ---------------------------------------------------------------------------------------------
# Cases 9-12: the recurrent encoder-decoder (tools/torch_model.py RnnSeq2Seq)
# ---------------------------------------------------------------------------------------------

def rnn_logits_in_one_call(model, src, tgt_in):
    """A second reading of RnnSeq2Seq for dot, general and none, where the decoder's input at step t is
    y_{t-1} alone (known for every t under teacher forcing): the decoder runs over the whole target in
    one call of torch.nn.LSTM / GRU, then attention is batched over the T positions. Checks the step
    loop (state carried, attention after the step, combine, out_proj) against PyTorch's own sequence
    loop. src (B,S), tgt_in (B,T) -> logits (B,T,V)."""
    cfg = model.cfg
    assert cfg.rnn_attention != "additive", "additive feeds c_t into the step: no one-call form"
    enc, h_fwd, h_bwd = model.encode(src)                                       # (B,S,D)
    s, _ = model.decoder(model.tgt_embed(tgt_in) * math.sqrt(model.cfg.d_model), model.initial_state(h_fwd, h_bwd))  # (B,T,D): top layer
    if cfg.rnn_attention == "none":
        return model.out_proj(torch.tanh(model.combine(s)))
    scores = s @ model.keys_of(enc).transpose(1, 2)                             # (B,T,S)
    alpha = torch.softmax(scores.masked_fill((src == cfg.pad_id)[:, None, :], -math.inf), dim=-1)
    context = alpha @ enc                                                       # (B,T,D)
    return model.out_proj(torch.tanh(model.combine(torch.cat([s, context], dim=-1))))


def rnn_seq2seq_case(case, seed, cell, attention):
    cfg = {"arch": "rnn", "src_vocab": 11, "tgt_vocab": 13, "d_model": 8, "encoder_layers": 2, "decoder_layers": 2,
           "dropout": 0.0, "rnn_cell": cell, "rnn_attention": attention, "max_len": 16, "pad_id": 0, "bos_id": 2,
           "label_smoothing": 0.1}
    torch.manual_seed(seed)
    model = tm.RnnSeq2Seq(model_config(cfg))
    model.train()  # dropout is 0; as in seq2seq_case
    randomise_(model)  # recurrent and linear weights Xavier-uniform, biases N(0, 0.1^2)
    D, pad = cfg["d_model"], cfg["pad_id"]
    # Larger than an initialisation, so that attention matters: embeddings N(0, 1/D) as initialised
    # (the model scales them by sqrt(D): unit-variance inputs), the recurrent
    # weights and the attention projections doubled (powers of two keep the values float32), score_v
    # N(0, 1). With initialisation-sized weights the top encoder layer's outputs are ~0.05, the keys
    # alike at every source position and tanh nearly linear; then W_q q shifts every score of a row
    # alike, which softmax ignores, and query_proj's gradient is a small difference of large terms
    # (PyTorch's own float32 then misses it by 1e-3 relative).
    with torch.no_grad():
        for emb in (model.src_embed, model.tgt_embed):
            emb.weight.copy_(f32_randn(*emb.weight.shape) / math.sqrt(D))
            emb.weight[pad].zero_()
        for name, p in model.named_parameters():
            if name.split(".")[0] in ("encoder", "decoder", "query_proj", "key_proj"):
                p.mul_(2.0)
        if attention == "additive":
            model.score_v.copy_(f32_randn(D))
    model32 = copy.deepcopy(model)  # float32, for the tolerance measurement
    model.double()

    # A translation batch (data/tasks.cpp): src = x (no <s> </s>), tgt_in = <s> y, tgt_out = y </s>,
    # padded with 0 at the end. Tokens: 0 pad, 2 <s>, 3 </s>, 4.. words. Source rows of lengths 6, 3
    # and 4 (the encoder reads them packed); target rows 1 and 2 padded, their padded targets ignored.
    src = torch.tensor([[5, 9, 4, 10, 7, 6], [8, 4, 6, 0, 0, 0], [10, 7, 7, 5, 0, 0]], dtype=torch.int64)   # (B,S)
    tgt_in = torch.tensor([[2, 5, 9, 4, 11, 7], [2, 8, 12, 6, 0, 0], [2, 10, 4, 4, 9, 0]], dtype=torch.int64)  # (B,T)
    tgt_out = torch.tensor([[5, 9, 4, 11, 7, 3], [8, 12, 6, 3, 0, 0], [10, 4, 4, 9, 3, 0]], dtype=torch.int64)  # (B,T)
    assert src.max() < cfg["src_vocab"] and tgt_in.max() < cfg["tgt_vocab"] and tgt_out.max() < cfg["tgt_vocab"]

    def loss_of(m):
        logits = m(src, tgt_in)  # (B,T,V)
        return logits, smoothed_cross_entropy_backward(logits, tgt_out, cfg)

    logits, loss = loss_of(model)
    if attention != "additive":
        grads = named_grads(model.named_parameters())
        model.zero_grad()
        their_logits = rnn_logits_in_one_call(model, src, tgt_in)
        smoothed_cross_entropy_backward(their_logits, tgt_out, cfg)
        gap = assert_same_as_torch_layers(case, logits.detach(), grads, their_logits.detach(),
                                          named_grads(model.named_parameters()))
        for name, p in model.named_parameters():  # the file gets the step loop's own gradients
            p.grad.copy_(grads[name])
    inputs = [("src", src), ("tgt_in", tgt_in), ("tgt_out", tgt_out)]
    save_model_case(case, cfg, inputs, model, logits, loss, model32, loss_of)
    if attention != "additive":
        print(f"  the decoder run over the whole target in one call gives the same logits and gradients to {gap:.3g}")


# Every case by name, in the order a full run writes them.
CASES = {
    "attention_self": lambda: attention_case("attention_self", seed=1, t_q=5, t_k=5, cross=False, causal=False),
    "attention_cross": lambda: attention_case("attention_cross", seed=2, t_q=4, t_k=6, cross=True, causal=False),
    "attention_causal": lambda: attention_case("attention_causal", seed=3, t_q=5, t_k=5, cross=False, causal=True),
    "layer_norm": layer_norm_case,
    "seq2seq_pre_ln": lambda: seq2seq_case("seq2seq_pre_ln", 5, {}),
    "seq2seq_post_ln": lambda: seq2seq_case("seq2seq_post_ln", 6, {"norm_position": "post", "activation": "gelu",
                                                                   "tgt_vocab": 13, "share_embeddings": False,
                                                                   "tie_output": False}),
    "decoder_only_lm": decoder_only_case,
    "recurrent_rnn": lambda: recurrent_case("recurrent_rnn", 7, "rnn"),
    "recurrent_gru": lambda: recurrent_case("recurrent_gru", 8, "gru"),
    "recurrent_lstm": lambda: recurrent_case("recurrent_lstm", 9, "lstm"),
    "rnn_seq2seq_additive": lambda: rnn_seq2seq_case("rnn_seq2seq_additive", 10, "lstm", "additive"),
    "rnn_seq2seq_dot": lambda: rnn_seq2seq_case("rnn_seq2seq_dot", 11, "gru", "dot"),
    "rnn_seq2seq_general": lambda: rnn_seq2seq_case("rnn_seq2seq_general", 12, "lstm", "general"),
    "rnn_seq2seq_none": lambda: rnn_seq2seq_case("rnn_seq2seq_none", 13, "lstm", "none"),
}


def main(argv):
    """argv: case names (none: every case). Each case seeds torch itself, so one case alone writes
    the same file as a full run."""
    unknown = [name for name in argv if name not in CASES]
    if unknown:
        print(f"make_reference.py: unknown case {', '.join(unknown)}; expected some of {', '.join(CASES)}",
              file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # deterministic summation order
    os.makedirs(OUT_DIR, exist_ok=True)
    for name in argv or list(CASES):
        CASES[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
