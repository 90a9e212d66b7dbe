#!/usr/bin/python3
"""Scratchformer's models in plain PyTorch (the Transformers and the recurrent encoder-decoder): loads a
Scratchformer checkpoint, computes what the C++ program computes (teacher-forced NLL, greedy
translations), and writes checkpoints Scratchformer loads.

Run it with Debian's python3-torch and python3-sentencepiece (the system interpreter); no pip package,
no safetensors package (the format is read and written here):

    tools/torch_model.py nll --checkpoint F --src S --ref R [--limit N] [--dtype float32|float64]
    tools/torch_model.py nll --checkpoint F --input TEXT                 (a data.task = "lm" model)
    tools/torch_model.py translate --checkpoint F [--input FILE] [--limit N]    (stdin -> stdout)
    tools/torch_model.py to-torch --checkpoint F --out model.pt
    tools/torch_model.py from-torch --torch model.pt --out F.safetensors [--tokenizer-from DIR]

nll and translate take --torch model.pt instead of --checkpoint; the tokenizer is read from beside the
checkpoint (or the .pt), or from --tokenizer-dir. A bad input (a missing file, a file that is not a
checkpoint, a config value this script does not know) is one line on stderr and exit status 2.

What it mirrors, file by file (the C++ is the definition; this is a second reading of it):
    nn/seq2seq.cpp, nn/decoder_only.cpp,     the three Transformers; module names are Scratchformer's
    nn/encoder_only.cpp                      parameter names, so load_state_dict(strict=True) works
    nn/rnn_seq2seq.cpp, nn/recurrent.cpp     arch rnn: torch.nn.LSTM / GRU / RNN, whose weight names and
                                             layout Scratchformer's Recurrent shares; a bidirectional
                                             encoder read packed, the bridge, the decoder stepped one
                                             token at a time with additive, dot, general or no attention
    nn/transformer_layers.cpp                pre/post norm, final norms (pre only), decoder norm1 self-
                                             attention, norm2 cross-attention, norm3 feed-forward
    nn/attention.cpp, relative_positions.cpp GQA/MQA (query head h reads k/v head h // G), RoPE on
                                             interleaved pairs (rope_scaling none, interpolation or ntk),
                                             ALiBi slopes 2^(-8(h+1)/H), masks TRUE = BLOCKED, the sliding
                                             window of self-attention (attention_window: |p - j| < W), a
                                             row whose keys are all blocked gives zeros
    nn/positional.cpp, nn/embedding.cpp      E[ids] * sqrt(D) + PE[p], PE sin at even, cos at odd dims
    nn/norm.cpp, transformer_layers.cpp      LayerNorm eps 1e-5, RMSNorm eps 1e-6
    train/checkpoint/safetensors.cpp, checkpoint.cpp    the file format and its FNV-1a checksum
    data/tasks.cpp, data/batcher.cpp         src = x (no <s> </s>), tgt_in = <s> y, tgt_out = y </s>;
                                             decoder-only: <s> x <sep> y </s>, loss on y </s> only
    train/eval/decode.cpp, evaluate.cpp      greedy decoding and its length limits, translate_all
    train/cli/cli_util.cpp, cmd_eval.cpp,    input lines, source truncation, which pairs eval counts
    train/setup.cpp                          (max_source_tokens), the tokenizer files beside a checkpoint

Letters in shape comments: B batch, S source length, T target length, P prompt length, D d_model,
H query heads, Hkv key/value heads, G = H / Hkv, Dh head width, F d_ff, V vocabulary, L max_len.
"""

import argparse
import dataclasses
import json
import math
import os
import shutil
import struct
import sys
import tomllib

import torch
import torch.nn as nn
import torch.nn.functional as F

PROGRAM = "torch_model.py"

# The fixed token ids of every Scratchformer tokenizer (data/tokenizer.h); task symbols follow.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
# data::kMaxBytesPerToken: a line of n tokens has fewer than n * 256 bytes.
MAX_BYTES_PER_TOKEN = 256
# --dtype: what nll and translate compute in (the C++ runs float32).
DTYPES = {"float32": torch.float32, "float64": torch.float64}


class ToolError(Exception):
    """A bad input: main() prints the message as one line and exits with status 2."""


# ---------------------------------------------------------------------------------------------
# safetensors (train/checkpoint/safetensors.h): 8-byte little-endian header length N, N bytes of JSON header
# (padded with spaces so the data starts 8-aligned), then the data section. The checksum metadata
# "scratchformer.checksum" = "fnv1a64:<16 hex>" is FNV-1a 64 of the data section: the bytes from
# offset 8 + N to the end of the file, every tensor (optimizer.* included), in file order.
# ---------------------------------------------------------------------------------------------

DTYPE_CODES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
CHECKSUM_KEY = "scratchformer.checksum"
ORIGIN_KEY = "scratchformer.origin"
EXTERNAL_ORIGIN = "external"
FORMAT_KEY, FORMAT = "scratchformer.format", "1"

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = 0xFFFFFFFFFFFFFFFF


def fnv1a64(data):
    """FNV-1a 64-bit hash of bytes, as Fnv1a64 in train/checkpoint/safetensors.cpp: h = (h XOR byte) * prime
    mod 2^64 for each byte. The Python loop is the whole cost (a checkpoint has millions of bytes), so it
    takes 8 bytes per iteration and reduces mod 2^64 once per 8 (the low 64 bits of a product depend
    only on the low 64 bits of its factors, so reducing later gives the same value)."""
    h, P = FNV_OFFSET, FNV_PRIME
    whole = len(data) - len(data) % 8
    eight = iter(memoryview(data)[:whole])
    for b0, b1, b2, b3, b4, b5, b6, b7 in zip(eight, eight, eight, eight, eight, eight, eight, eight):
        h = ((((((((((((((((h ^ b0) * P) ^ b1) * P) ^ b2) * P) ^ b3) * P) ^ b4) * P) ^ b5) * P) ^ b6) * P)
               ^ b7) * P) & MASK64
    for b in memoryview(data)[whole:]:
        h = ((h ^ b) * P) & MASK64
    return h


def checksum_text(data):
    return "fnv1a64:%016x" % fnv1a64(data)


def read_safetensors(path, verify=True):
    """-> (tensors: dict name -> tensor in file order, metadata: dict str -> str). Checks what
    load_safetensors checks: the header, every entry, the tensors tiling the data section, and the
    checksum (required unless the metadata says "scratchformer.origin": "external"; verify=False
    skips computing it). ToolError naming the file otherwise."""
    if not os.path.exists(path):
        raise ToolError(f"{path}: checkpoint file not found")
    if os.path.isdir(path):
        raise ToolError(f"{path}: is a directory, expected a .safetensors file")
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ToolError(f"{path}: file is {len(blob)} bytes, too short to hold the 8-byte header length "
                        "(expected a safetensors file)")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > len(blob) - 8:
        raise ToolError(f"{path}: header length {header_len} is larger than the rest of the file "
                        f"({len(blob) - 8} bytes): not a safetensors file, or truncated")
    try:
        header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ToolError(f"{path}: malformed JSON header ({e}): not a safetensors file") from None
    if not isinstance(header, dict):
        raise ToolError(f"{path}: malformed header: expected a JSON object, found {type(header).__name__}")
    data = memoryview(blob)[8 + header_len:]

    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ToolError(f"{path}: __metadata__ must be an object of strings")
    entries = []  # (begin, end, name, dtype, shape)
    for name, entry in header.items():
        where = f"{path}: tensor {name!r}"
        if not isinstance(entry, dict) or entry.get("dtype") not in CODE_DTYPES:
            found = entry.get("dtype") if isinstance(entry, dict) else entry
            raise ToolError(f"{where}: expected dtype F32, F64 or I64, found {found!r}")
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ToolError(f"{where}: expected a shape of non-negative integers, found {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(n, int) for n in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= len(data)):
            raise ToolError(f"{where}: data_offsets {offsets!r} are not [begin, end] inside the data section "
                            f"({len(data)} bytes): the file is truncated or damaged")
        dtype = CODE_DTYPES[entry["dtype"]]
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if offsets[1] - offsets[0] != nbytes:
            raise ToolError(f"{where}: shape {shape} of {entry['dtype']} needs {nbytes} bytes but data_offsets "
                            f"{offsets} hold {offsets[1] - offsets[0]}")
        entries.append((offsets[0], offsets[1], name, dtype, shape))
    entries.sort(key=lambda e: (e[0], e[1]))
    expected = 0
    for begin, end, name, _, _ in entries:
        if begin != expected:
            raise ToolError(f"{path}: tensor {name!r} starts at byte {begin} of the data section, expected "
                            f"{expected} (the tensors must tile it: no gaps, no overlaps)")
        expected = end
    if expected != len(data):
        raise ToolError(f"{path}: the tensors cover {expected} bytes of data but the file holds {len(data)}: "
                        "truncated or damaged")

    recorded = metadata.get(CHECKSUM_KEY)
    if recorded is None and metadata.get(ORIGIN_KEY) != EXTERNAL_ORIGIN:
        raise ToolError(f"{path}: no checksum: metadata key {CHECKSUM_KEY!r} is missing (a file written by "
                        f"another tool loads unverified only if its metadata says {ORIGIN_KEY!r}: "
                        f"{EXTERNAL_ORIGIN!r})")
    if recorded is not None and not recorded.startswith("fnv1a64:"):
        raise ToolError(f"{path}: unknown checksum {recorded!r} (expected fnv1a64:<16 hex digits>)")
    if recorded is not None and verify:
        computed = checksum_text(data)
        if computed != recorded:
            raise ToolError(f"{path}: checksum mismatch: the data hashes to {computed} but the header records "
                            f"{recorded} (the file is corrupted)")

    tensors = {}
    for begin, end, name, dtype, shape in entries:
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(shape)
    return tensors, metadata


def write_safetensors(path, tensors, metadata):
    """tensors: [(name, tensor)] in file order (float32, float64 or int64, written row-major);
    metadata: dict str -> str, to which the checksum is added. Written to PATH.tmp, then renamed over
    PATH (as save_safetensors), so PATH is never half-written. Returns the file's size in bytes."""
    entries, blobs, offset = {}, [], 0
    for name, t in tensors:
        t = t.detach().contiguous().cpu()
        if t.dtype not in DTYPE_CODES:
            raise ValueError(f"{name}: dtype {t.dtype} cannot be saved (F32, F64 or I64 only)")
        if name in entries or name == "__metadata__":
            raise ValueError(f"duplicate or reserved tensor name {name!r}")
        blob = t.numpy().tobytes()  # row-major; x86 and ARM are little-endian
        entries[name] = {"dtype": DTYPE_CODES[t.dtype], "shape": list(t.shape),
                         "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    data = b"".join(blobs)
    meta = {k: str(v) for k, v in metadata.items()}
    meta[CHECKSUM_KEY] = checksum_text(data)
    header = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":")).encode("utf-8")
    header += b" " * (-(8 + len(header)) % 8)  # the data section starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return 8 + len(header) + len(data)


# ---------------------------------------------------------------------------------------------
# The model's hyper-parameters: nn::ModelConfig, read from the checkpoint's config ([model] of
# train/config.h; the vocabulary sizes come from the metadata or the weights)
# ---------------------------------------------------------------------------------------------

# [model] keys with their defaults (train/config.h ModelSection) and, for strings, the choices.
MODEL_DEFAULTS = {
    "arch": "encoder-decoder", "d_model": 256, "n_heads": 4, "n_kv_heads": 0, "d_ff": 1024, "encoder_layers": 3,
    "decoder_layers": 3, "dropout": 0.1, "attention_dropout": 0.0, "activation": "relu", "norm": "layernorm",
    "norm_position": "pre", "positional": "sinusoidal", "attention": "plain", "attention_window": 0,
    "rope_scaling": "none", "rope_factor": 1.0, "share_embeddings": True, "tie_output": True, "max_len": 256,
    "pooling": "mean", "rnn_cell": "lstm", "rnn_attention": "additive",
}
MODEL_CHOICES = {
    "arch": ["encoder-decoder", "decoder-only", "encoder-only", "rnn"], "activation": ["relu", "gelu", "swiglu"],
    "norm": ["layernorm", "rmsnorm"], "norm_position": ["pre", "post"],
    "positional": ["sinusoidal", "learned", "rope", "alibi", "none"], "attention": ["plain", "tiled"],
    "rope_scaling": ["none", "interpolation", "ntk"], "pooling": ["mean", "cls"], "rnn_cell": ["lstm", "gru", "rnn"],
    "rnn_attention": ["none", "additive", "dot", "general"],
}
# Keys only one arch reads (train/config.cpp arch_choice): an error in a config of another arch, and
# written into a checkpoint's config only for that one.
ARCH_ONLY_KEYS = {"rnn_cell": "rnn", "rnn_attention": "rnn"}
# The architectures that read a source with an encoder and translate it (not the decoder-only prompt).
SOURCE_READING_ARCHS = ("encoder-decoder", "rnn")
TASKS = ["translation", "lm", "mlm", "classify"]
ROPE_SCALINGS = MODEL_CHOICES["rope_scaling"]


@dataclasses.dataclass
class ModelConfig:
    """What the layers are built from (nn/transformer_layers.h ModelConfig); dropout is not here: this
    model only evaluates. Arch rnn reads only the vocabularies, d_model, the layer counts, max_len, the
    ids and the rnn_* fields."""
    arch: str = "encoder-decoder"   # encoder-decoder | decoder-only | encoder-only | rnn
    src_vocab: int = 0              # source vocabulary (decoder-only: 0 or tgt_vocab)
    tgt_vocab: int = 0              # target vocabulary (decoder-only: the one vocabulary)
    d_model: int = 256              # D
    n_heads: int = 4                # H, D % H == 0
    n_kv_heads: int = 0             # Hkv; 0 = H (multi-head), 1 = multi-query, else grouped-query
    d_ff: int = 1024                # F
    encoder_layers: int = 3
    decoder_layers: int = 3
    activation: str = "relu"        # relu | gelu | swiglu
    norm: str = "layernorm"         # layernorm (eps 1e-5) | rmsnorm (eps 1e-6)
    norm_position: str = "pre"      # pre | post
    positional: str = "sinusoidal"  # sinusoidal | learned | rope | alibi | none
    attention_window: int = 0       # W: self-attention reads keys j with |p - j| < W only; 0 = every key
    rope_scaling: str = "none"      # positional rope only: none | interpolation | ntk (rope_frequencies)
    rope_factor: float = 1.0        # how many times the trained length, >= 1; 1 with rope_scaling none
    share_embeddings: bool = False  # encoder-decoder: one table for both sides
    tie_output: bool = False        # encoder-decoder: logits = h E_tgt^T (else output_proj, no bias)
    max_len: int = 256              # L
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    num_classes: int = 0            # encoder-only: 0 = the masked-LM head, C > 0 = the classifier
    pooling: str = "mean"           # encoder-only classifier: mean | cls
    rnn_cell: str = "lstm"          # rnn: the cell of encoder and decoder, lstm | gru | rnn (Elman, tanh)
    rnn_attention: str = "additive" # rnn: how the decoder reads the source, additive | dot | general | none

    def kv_heads(self):
        return self.n_kv_heads or self.n_heads

    def validate(self):
        """ToolError naming the field, what was expected and what was found (ModelConfig::validate)."""
        def need(ok, message):
            if not ok:
                raise ToolError(f"model config: {message}")
        if self.arch == "rnn":  # only what the recurrent model reads (validate_rnn)
            for field in ("src_vocab", "tgt_vocab", "d_model", "encoder_layers", "decoder_layers", "max_len"):
                need(getattr(self, field) > 0, f"expected {field} > 0, found {getattr(self, field)}")
            need(self.d_model % 2 == 0, f"arch rnn needs an even d_model (D/2 units per encoder direction), "
                 f"found {self.d_model}")
            need(0 <= self.pad_id < min(self.src_vocab, self.tgt_vocab), f"pad_id {self.pad_id} is not a token of "
                 f"both vocabularies (src_vocab {self.src_vocab}, tgt_vocab {self.tgt_vocab})")
            return
        for field in ("d_model", "n_heads", "d_ff", "max_len", "tgt_vocab"):
            need(getattr(self, field) > 0, f"expected {field} > 0, found {getattr(self, field)}")
        if self.arch == "decoder-only":
            need(self.src_vocab in (0, self.tgt_vocab), f"a decoder-only model has one vocabulary: expected "
                 f"src_vocab 0 or tgt_vocab {self.tgt_vocab}, found {self.src_vocab}")
        else:
            need(self.src_vocab > 0, f"expected src_vocab > 0, found {self.src_vocab}")
        stacks = {"encoder-decoder": ["encoder_layers", "decoder_layers"], "decoder-only": ["decoder_layers"],
                  "encoder-only": ["encoder_layers"]}[self.arch]
        for field in stacks:
            need(getattr(self, field) > 0, f"expected {field} > 0, found {getattr(self, field)}")
        need(self.d_model % self.n_heads == 0, f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        need(self.n_kv_heads >= 0 and self.n_heads % self.kv_heads() == 0,
             f"expected n_kv_heads 0 or a divisor of n_heads {self.n_heads}, found {self.n_kv_heads}")
        need(self.positional != "rope" or (self.d_model // self.n_heads) % 2 == 0,
             f"positional rope needs an even head width, found d_model {self.d_model} / n_heads {self.n_heads}")
        need(0 <= self.attention_window <= self.max_len, f"expected attention_window 0 (full attention) to "
             f"max_len {self.max_len}, found {self.attention_window}")
        need(self.rope_scaling in ROPE_SCALINGS, f"expected rope_scaling one of {', '.join(ROPE_SCALINGS)}, "
             f"found {self.rope_scaling!r}")
        need(self.rope_scaling == "none" or self.positional == "rope", f"rope_scaling {self.rope_scaling!r} "
             f"scales RoPE's rotation frequencies: expected positional 'rope', found {self.positional!r}")
        need(math.isfinite(self.rope_factor) and self.rope_factor >= 1,
             f"expected rope_factor >= 1 (how many times the trained length), found {self.rope_factor}")
        need(self.rope_factor == 1 or self.rope_scaling != "none", f"rope_factor is read only with rope_scaling "
             f"'interpolation' or 'ntk': expected rope_factor 1 with rope_scaling 'none', found {self.rope_factor}")
        need(not (self.arch == "encoder-decoder" and self.share_embeddings and self.src_vocab != self.tgt_vocab),
             f"share_embeddings needs src_vocab == tgt_vocab, found {self.src_vocab} and {self.tgt_vocab}")
        need(self.num_classes >= 0, f"expected num_classes >= 0, found {self.num_classes}")


def parse_config(toml_text, origin):
    """The checkpoint's config (TOML) -> dict of sections with [model] and the [data] keys used here
    filled in from their defaults and checked. ToolError naming the key otherwise."""
    try:
        settings = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as e:
        raise ToolError(f"{origin}: the config in the checkpoint is not valid TOML: {e}") from None
    model = settings.get("model", {})
    if not isinstance(model, dict):
        raise ToolError(f"{origin}: config: expected a [model] section, found {type(model).__name__}")
    for key, value in model.items():
        if key not in MODEL_DEFAULTS:
            raise ToolError(f"{origin}: config: unknown key model.{key} (expected one of {', '.join(MODEL_DEFAULTS)})")
        default = MODEL_DEFAULTS[key]
        ok_type = isinstance(value, type(default)) and (isinstance(value, bool) == isinstance(default, bool))
        if isinstance(default, float):
            ok_type = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok_type:
            raise ToolError(f"{origin}: config: model.{key}: expected {type(default).__name__}, found {value!r}")
        if isinstance(default, float) and not math.isfinite(value):
            raise ToolError(f"{origin}: config: model.{key}: expected a finite number, found {value!r}")
        if key in MODEL_CHOICES and value not in MODEL_CHOICES[key]:
            raise ToolError(f"{origin}: config: model.{key}: expected one of {', '.join(MODEL_CHOICES[key])}, "
                            f"found {value!r}")
        arch = model.get("arch", MODEL_DEFAULTS["arch"])
        if key in ARCH_ONLY_KEYS and arch != ARCH_ONLY_KEYS[key]:
            raise ToolError(f"{origin}: config: model.{key}: only model.arch = {ARCH_ONLY_KEYS[key]!r} reads this key, "
                            f"but model.arch is {arch!r}")
    settings["model"] = {**MODEL_DEFAULTS, **model}
    data = settings.setdefault("data", {})
    data.setdefault("task", "translation")
    data.setdefault("joint_tokenizer", True)
    data.setdefault("labels", "")
    if data["task"] not in TASKS:
        raise ToolError(f"{origin}: config: data.task: expected one of {', '.join(TASKS)}, found {data['task']!r}")
    return settings


def model_config_from(settings, src_vocab, tgt_vocab):
    """[model] (parse_config's) + vocabulary sizes -> ModelConfig, validated (train/setup.cpp
    model_config_from)."""
    m = settings["model"]
    labels = settings["data"]["labels"]
    classes = len(labels.split(",")) if settings["data"]["task"] == "classify" and labels else 0
    cfg = ModelConfig(arch=m["arch"], src_vocab=src_vocab, tgt_vocab=tgt_vocab, d_model=m["d_model"],
                      n_heads=m["n_heads"], n_kv_heads=m["n_kv_heads"], d_ff=m["d_ff"],
                      encoder_layers=m["encoder_layers"], decoder_layers=m["decoder_layers"],
                      activation=m["activation"], norm=m["norm"], norm_position=m["norm_position"],
                      positional=m["positional"], attention_window=m["attention_window"],
                      rope_scaling=m["rope_scaling"], rope_factor=float(m["rope_factor"]),
                      share_embeddings=m["share_embeddings"],
                      tie_output=m["tie_output"], max_len=m["max_len"], num_classes=classes, pooling=m["pooling"],
                      rnn_cell=m["rnn_cell"], rnn_attention=m["rnn_attention"])
    cfg.validate()
    return cfg


# ---------------------------------------------------------------------------------------------
# Positions (nn/positional.cpp, nn/relative_positions.cpp) and masks (nn/attention.cpp)
# ---------------------------------------------------------------------------------------------

def sinusoidal_table(max_len, d):
    """-> (L, D) float64: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D)),
    positions from 0 (the paper, sec. 3.5)."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, two_i / d)
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def check_positions(module, start_pos, T, max_len):
    if start_pos < 0 or start_pos + T > max_len:
        raise ValueError(f"{module}: positions {start_pos} .. {start_pos + T - 1} exceed max_len {max_len}")


class SinusoidalPositional(nn.Module):
    """x + PE[start_pos : start_pos+T]; the table is a constant (a buffer kept out of the state dict,
    as Scratchformer saves no tensor for it), computed in float64 and used in x's dtype."""

    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)  # (L, D)

    def forward(self, x, start_pos=0):
        """x (B,T,D) -> (B,T,D)"""
        check_positions("SinusoidalPositional", start_pos, x.shape[1], self.max_len)
        return x + self.table[start_pos:start_pos + x.shape[1]].to(x.dtype)


class LearnedPositional(nn.Module):
    """x + weight[start_pos : start_pos+T], weight (L, D) a parameter ("src_pos.weight", "pos.weight")."""

    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.empty(max_len, d_model).normal_(0.0, 0.02))  # GPT-2's init, as C++

    def forward(self, x, start_pos=0):
        """x (B,T,D) -> (B,T,D)"""
        check_positions("LearnedPositional", start_pos, x.shape[1], self.max_len)
        return x + self.weight[start_pos:start_pos + x.shape[1]]


def make_positions(cfg):
    """The absolute positional module of cfg.positional, or None (rope and alibi act inside
    self-attention; none adds nothing anywhere)."""
    if cfg.positional == "sinusoidal":
        return SinusoidalPositional(cfg.max_len, cfg.d_model)
    if cfg.positional == "learned":
        return LearnedPositional(cfg.max_len, cfg.d_model)
    return None


ROPE_BASE = 10000.0


def rope_frequencies(head_dim, scaling="none", factor=1.0):
    """-> (position_scale, theta (Dh/2) float64): pair k at position p turns by p * position_scale *
    theta_k, theta_k = base^(-2k/Dh), for model.rope_scaling
        none           position_scale 1,           base 10000
        interpolation  position_scale 1 / factor,  base 10000   (position interpolation, Chen et al. 2023)
        ntk            position_scale 1,           base 10000 * factor^(Dh/(Dh-2))   (NTK-aware scaling:
                       the fastest pair k = 0 turns as before, the slowest, k = Dh/2-1, as interpolated)
    With Dh = 2 the one pair's theta_0 = base^0 = 1 whatever the base, so ntk changes nothing (and its
    exponent Dh/(Dh-2) is not computed)."""
    if scaling not in ROPE_SCALINGS:
        raise ValueError(f"rope_frequencies: expected scaling one of {', '.join(ROPE_SCALINGS)}, found {scaling!r}")
    position_scale, base = 1.0, ROPE_BASE
    if scaling == "interpolation":
        position_scale = 1.0 / factor
    elif scaling == "ntk" and head_dim > 2:
        base = ROPE_BASE * factor ** (head_dim / (head_dim - 2))
    theta = torch.pow(base, -2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)  # (Dh/2)
    return position_scale, theta


def apply_rope(x, start_pos, scaling="none", factor=1.0):
    """x (B,H,T,Dh) -> (B,H,T,Dh): row t sits at position p = start_pos + t; the interleaved pair
    (x[2k], x[2k+1]) turns by p * position_scale * theta_k (rope_frequencies; RoFormer's pairs, not
    the half split)."""
    T, Dh = x.shape[-2], x.shape[-1]
    position_scale, theta = rope_frequencies(Dh, scaling, factor)                            # (Dh/2)
    positions = (start_pos + torch.arange(T, dtype=torch.float64)) * position_scale          # (T)
    angle = positions[:, None] * theta[None, :]                                              # (T,Dh/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]                                                   # (B,H,T,Dh/2)
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def alibi_bias(n_heads, t_q, t_k, q_start, causal, dtype):
    """-> (H,Tq,Tk): -m_h * (q_pos - k_pos) (causal) or -m_h * |q_pos - k_pos|, m_h = 2^(-8(h+1)/H),
    query i at q_start + i, key j at j."""
    slopes = torch.pow(2.0, -8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)   # (H)
    distance = ((q_start + torch.arange(t_q, dtype=torch.float64))[:, None]
                - torch.arange(t_k, dtype=torch.float64)[None, :])                                 # (Tq,Tk)
    if not causal:
        distance = distance.abs()
    return (-slopes[:, None, None] * distance[None]).to(dtype)


# BEGIN RELATED(masks): the two masks in PyTorch, one line each
def causal_mask(t_q, t_k, q_start=0):
    """-> bool (Tq,Tk), TRUE = BLOCKED where key j > query position q_start + i."""
    return torch.arange(t_k)[None, :] > (q_start + torch.arange(t_q))[:, None]


def padding_mask(ids, pad_id):
    """ids (B,S) -> bool (B,1,1,S), TRUE = BLOCKED where ids is pad_id (no query reads a padding key)."""
    return (ids == pad_id)[:, None, None, :]
# HANDOUT INSTEAD:
# def causal_mask(t_q, t_k, q_start=0):
#     raise NotImplementedError("hidden with the exercise masks (docs/exercises.md)")
#
#
# def padding_mask(ids, pad_id):
#     raise NotImplementedError("hidden with the exercise masks (docs/exercises.md)")
# END RELATED


def window_mask(t_q, t_k, window, q_start=0):
    """-> bool (Tq,Tk), TRUE = BLOCKED where |query position q_start + i - key j| >= window, the sliding
    window W > 0 of model.attention_window: a query at p reads keys p-W+1 .. p+W-1 (with the causal
    mask, the W keys p-W+1 .. p)."""
    distance = (q_start + torch.arange(t_q))[:, None] - torch.arange(t_k)[None, :]          # (Tq,Tk)
    return distance.abs() >= window


# ---------------------------------------------------------------------------------------------
# Layers (nn/attention.cpp, nn/feed_forward.cpp, nn/norm.cpp, nn/transformer_layers.cpp)
# ---------------------------------------------------------------------------------------------

class KVCache:
    """Keys and values kept between decoding steps: k, v (B,Hkv,T_cached,Dh), None while empty.
    Self-attention appends each step's keys; cross-attention (static) is filled once from the encoder
    output and reused."""

    def __init__(self, static=False):
        self.k = self.v = None
        self.static = static

    def length(self):
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k, v):
        """k, v (B,Hkv,Tnew,Dh) follow the cached ones along T."""
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)


class LayerCache:
    """One decoder layer's caches: masked self-attention and cross-attention."""

    def __init__(self):
        self.self_attn = KVCache()
        self.cross_attn = KVCache(static=True)


class MultiHeadAttention(nn.Module):
    """softmax(q k^T / sqrt(Dh) + bias, blocked keys -inf) v per head, heads concatenated and mixed by
    out_proj. Parameters q_proj (D -> H*Dh), k_proj, v_proj (D -> Hkv*Dh), out_proj (H*Dh -> D), all
    with bias. positions: "rope" or "alibi" in self-attention, "none" otherwise; rope_scaling and
    rope_factor: how rope turns (rope_frequencies). window: W > 0 blocks the keys with |p - j| >= W
    (window_mask; self-attention only), 0 none."""

    def __init__(self, d_model, n_heads, n_kv_heads, positions="none", window=0, rope_scaling="none",
                 rope_factor=1.0):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d_model // n_heads
        self.positions = positions
        self.window, self.rope_scaling, self.rope_factor = window, rope_scaling, rope_factor
        self.q_proj = nn.Linear(d_model, n_heads * self.head_dim)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.head_dim)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.head_dim)
        self.out_proj = nn.Linear(n_heads * self.head_dim, d_model)

    def split_heads(self, x, n):
        """(B,T,n*Dh) -> (B,n,T,Dh)"""
        return x.reshape(x.shape[0], x.shape[1], n, self.head_dim).transpose(1, 2)

    def forward(self, x_q, x_kv, blocked=None, cache=None, q_start=0, causal_positions=False):
        """x_q (B,Tq,D), x_kv (B,Tk,D) -> (B,Tq,D). blocked: bool broadcastable to (B,H,Tq,Tk), TRUE =
        BLOCKED, Tk counting cached keys too; None = every key. cache: a KVCache (x_kv unused once a
        static cache is filled). Query i sits at q_start + i, the keys at 0..Tk-1 (also for the
        window)."""
        B, t_q = x_q.shape[0], x_q.shape[1]
        rope = self.positions == "rope"
        q = self.split_heads(self.q_proj(x_q), self.n_heads)                      # (B,H,Tq,Dh)
        if rope:
            q = apply_rope(q, q_start, self.rope_scaling, self.rope_factor)
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v                                               # (B,Hkv,Tk,Dh)
        else:
            k = self.split_heads(self.k_proj(x_kv), self.n_kv_heads)             # (B,Hkv,Tnew,Dh)
            v = self.split_heads(self.v_proj(x_kv), self.n_kv_heads)
            if rope:  # the new keys follow the cached ones
                k = apply_rope(k, cache.length() if cache is not None and not cache.static else 0,
                               self.rope_scaling, self.rope_factor)
            if cache is not None:
                cache.append(k, v)
                k, v = cache.k, cache.v                                           # (B,Hkv,Tk,Dh)
        t_k = k.shape[2]
        groups = self.n_heads // self.n_kv_heads  # G: query head h reads k/v head h // G
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)   # (B,H,Tk,Dh)

        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(self.head_dim))        # (B,H,Tq,Tk)
        if self.positions == "alibi":
            scores = scores + alibi_bias(self.n_heads, t_q, t_k, q_start, causal_positions, scores.dtype)
        if self.window > 0:  # (Tq,Tk), or'ed into the caller's mask: (..,Tq,Tk)
            outside = window_mask(t_q, t_k, self.window, q_start)
            blocked = outside if blocked is None else blocked | outside
        if blocked is not None:
            scores = scores.masked_fill(blocked, -math.inf)
        weights = torch.softmax(scores, dim=-1)
        if blocked is not None:  # a query whose keys are all blocked outputs zeros (C++), not NaN
            weights = weights.masked_fill(blocked.all(dim=-1, keepdim=True), 0.0)
        heads = weights @ v                                                        # (B,H,Tq,Dh)
        return self.out_proj(heads.transpose(1, 2).reshape(B, t_q, self.n_heads * self.head_dim))


class FeedForward(nn.Module):
    """relu, gelu (the exact erf form): fc2(act(fc1(x))); swiglu: fc2(silu(gate(x)) * fc1(x))."""

    def __init__(self, d_model, d_ff, activation):
        super().__init__()
        self.activation = activation
        self.fc1 = nn.Linear(d_model, d_ff)
        if activation == "swiglu":
            self.gate = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        """x (..., D) -> (..., D)"""
        h = self.fc1(x)                                                            # (..., F)
        if self.activation == "relu":
            h = F.relu(h)
        elif self.activation == "gelu":
            h = F.gelu(h)
        else:
            h = F.silu(self.gate(x)) * h
        return self.fc2(h)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight; parameter "weight" only."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        """x (..., D) -> (..., D)"""
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def make_norm(kind, dim):
    return nn.LayerNorm(dim, eps=1e-5) if kind == "layernorm" else RMSNorm(dim, eps=1e-6)


def self_attention_positions(cfg):
    """How positions enter self-attention: rope, alibi, or none (cross-attention never has any)."""
    return cfg.positional if cfg.positional in ("rope", "alibi") else "none"


def self_attention(cfg):
    """A layer's self-attention: its positions (rope with cfg's scaling, alibi) and the sliding window
    (cross-attention has neither)."""
    return MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.kv_heads(), self_attention_positions(cfg),
                              window=cfg.attention_window, rope_scaling=cfg.rope_scaling, rope_factor=cfg.rope_factor)


def residual_block(pre_norm, norm, sublayer, x):
    """pre:  x + sublayer(norm(x))      post: norm(x + sublayer(x))       x (B,T,D) -> (B,T,D)"""
    if pre_norm:
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward block (norm1, norm2). As a decoder-only block it gets a
    causal mask, causal=True (ALiBi's signed distance) and a KVCache."""

    def __init__(self, cfg):
        super().__init__()
        self.pre_norm = cfg.norm_position == "pre"
        self.self_attn = self_attention(cfg)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation)
        self.norm1 = make_norm(cfg.norm, cfg.d_model)
        self.norm2 = make_norm(cfg.norm, cfg.d_model)

    def forward(self, x, blocked, cache=None, start_pos=0, causal=False):
        """x (B,S,D) at positions start_pos.., blocked (B,1,1,S) or (S,S_keys) -> (B,S,D)"""
        x = residual_block(self.pre_norm, self.norm1,
                           lambda h: self.self_attn(h, h, blocked, cache, start_pos, causal), x)
        return residual_block(self.pre_norm, self.norm2, self.ffn, x)


class DecoderLayer(nn.Module):
    """Masked self-attention (norm1), cross-attention over the encoder output (norm2), the
    feed-forward block (norm3)."""

    def __init__(self, cfg):
        super().__init__()
        self.pre_norm = cfg.norm_position == "pre"
        self.self_attn = self_attention(cfg)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.kv_heads(), "none")
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation)
        self.norm1 = make_norm(cfg.norm, cfg.d_model)
        self.norm2 = make_norm(cfg.norm, cfg.d_model)
        self.norm3 = make_norm(cfg.norm, cfg.d_model)

    def forward(self, y, memory, self_blocked, memory_blocked, cache=None, start_pos=0):
        """y (B,T,D) at positions start_pos.., memory (B,S,D), self_blocked (T,T_keys) or None,
        memory_blocked (B,1,1,S) -> (B,T,D). cache: a LayerCache or None."""
        self_cache = cache.self_attn if cache is not None else None
        cross_cache = cache.cross_attn if cache is not None else None
        y = residual_block(self.pre_norm, self.norm1,
                           lambda h: self.self_attn(h, h, self_blocked, self_cache, start_pos, True), y)
        y = residual_block(self.pre_norm, self.norm2,
                           lambda h: self.cross_attn(h, memory, memory_blocked, cross_cache, start_pos), y)
        return residual_block(self.pre_norm, self.norm3, self.ffn, y)


class Encoder(nn.Module):
    """The encoder layers, then the final norm under pre-norm."""

    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(cfg) for _ in range(cfg.encoder_layers)])
        self.norm = make_norm(cfg.norm, cfg.d_model) if cfg.norm_position == "pre" else None

    def forward(self, x, blocked):
        """x (B,S,D), blocked (B,1,1,S) -> (B,S,D)"""
        for layer in self.layers:
            x = layer(x, blocked)
        return self.norm(x) if self.norm is not None else x


class Decoder(nn.Module):
    """The decoder layers, then the final norm under pre-norm."""

    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.decoder_layers)])
        self.norm = make_norm(cfg.norm, cfg.d_model) if cfg.norm_position == "pre" else None

    def forward(self, y, memory, self_blocked, memory_blocked, caches=None, start_pos=0):
        """y (B,T,D), memory (B,S,D) -> (B,T,D); caches: one LayerCache per layer, or None."""
        for i, layer in enumerate(self.layers):
            y = layer(y, memory, self_blocked, memory_blocked, caches[i] if caches is not None else None, start_pos)
        return self.norm(y) if self.norm is not None else y


# ---------------------------------------------------------------------------------------------
# The three Transformers (nn/seq2seq.cpp, nn/decoder_only.cpp, nn/encoder_only.cpp). Parameters
# are registered in Scratchformer's order, so state_dict() lists them as its checkpoints do.
# ---------------------------------------------------------------------------------------------

class EncoderDecoderState:
    """What greedy decoding keeps for B rows: the encoder output, its mask, the decoder's caches, and
    the token each row's first decode_step reads (<s>)."""

    def __init__(self, memory, memory_blocked, layers, first_tokens):
        self.memory, self.memory_blocked = memory, memory_blocked        # (B,S,D), (B,1,1,S)
        self.caches = [LayerCache() for _ in range(layers)]
        self.first_tokens = first_tokens                                 # (B,1)

    def length(self):
        """Target positions cached so far."""
        return self.caches[0].self_attn.length()


class Seq2SeqTransformer(nn.Module):
    """The encoder-decoder: logits = decoder(embed(tgt_in), encoder(embed(src))) projected to the
    target vocabulary. embed(ids) = E[ids] * sqrt(D) + PE (sinusoidal or learned; rope and alibi act in
    self-attention). Parameters: src_embed.weight, tgt_embed.weight (not with share_embeddings: one
    table, saved once as src_embed.weight), src_pos.weight / tgt_pos.weight (learned), encoder.*,
    decoder.*, output_proj.weight (not with tie_output: logits = h E_tgt^T)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        D = cfg.d_model
        self.src_embed = nn.Embedding(cfg.src_vocab, D, padding_idx=cfg.pad_id)
        if not cfg.share_embeddings:
            self.tgt_embed = nn.Embedding(cfg.tgt_vocab, D, padding_idx=cfg.pad_id)
        self.src_pos = make_positions(cfg)
        self.tgt_pos = make_positions(cfg)
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        if not cfg.tie_output:
            self.output_proj = nn.Linear(D, cfg.tgt_vocab, bias=False)

    def target_table(self):
        """The target embedding (src_embed itself with share_embeddings)."""
        return self.src_embed if self.cfg.share_embeddings else self.tgt_embed

    def embed(self, table, positions, ids, start_pos=0):
        """ids (B,T) -> (B,T,D) = E[ids] * sqrt(D) + PE[start_pos ..]"""
        x = table(ids) * math.sqrt(self.cfg.d_model)
        return positions(x, start_pos) if positions is not None else x

    def project(self, h):
        """h (B,T,D) -> logits (B,T,V)"""
        if self.cfg.tie_output:
            return h @ self.target_table().weight.t()
        return self.output_proj(h)

    def encode(self, src):
        """src (B,S) -> memory (B,S,D), its mask (B,1,1,S)"""
        blocked = padding_mask(src, self.cfg.pad_id)
        return self.encoder(self.embed(self.src_embed, self.src_pos, src), blocked), blocked

    def forward(self, src, tgt_in):
        """src (B,S), tgt_in (B,T) = <s> y -> logits (B,T,V), teacher forcing"""
        memory, memory_blocked = self.encode(src)
        T = tgt_in.shape[1]
        y = self.embed(self.target_table(), self.tgt_pos, tgt_in)
        return self.project(self.decoder(y, memory, causal_mask(T, T), memory_blocked))

    def start_decoding(self, src):
        """src (B,S) padded -> the state; each row's first decode_step reads <s>."""
        memory, memory_blocked = self.encode(src)
        bos = torch.full((src.shape[0], 1), self.cfg.bos_id, dtype=torch.int64)
        return EncoderDecoderState(memory, memory_blocked, len(self.decoder.layers), bos)

    def decode_step(self, tokens, state):
        """tokens (B,1), each row's newest token at position state.length() -> logits (B,V)"""
        start_pos = state.length()
        y = self.embed(self.target_table(), self.tgt_pos, tokens, start_pos)       # (B,1,D)
        h = self.decoder(y, state.memory, None, state.memory_blocked, state.caches, start_pos)  # one query: no mask
        return self.project(h)[:, 0]


class DecoderOnlyState:
    """A decoder-only model's decoding state: every layer's self-attention cache, and the token each
    row's first decode_step reads (the prompt's last)."""

    def __init__(self, layers, first_tokens):
        self.caches = [KVCache() for _ in range(layers)]
        self.first_tokens = first_tokens                                 # (B,1)

    def length(self):
        return self.caches[0].length()


class DecoderOnlyTransformer(nn.Module):
    """The causal language model (GPT's shape): N encoder layers run with a causal mask, the final
    norm (pre-norm), logits = h E^T (the head tied to the embedding). Parameters embed.weight,
    pos.weight (learned), layers.N.*, norm.* (pre-norm)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.tgt_vocab, cfg.d_model, padding_idx=cfg.pad_id)
        self.pos = make_positions(cfg)
        self.layers = nn.ModuleList([EncoderLayer(cfg) for _ in range(cfg.decoder_layers)])
        self.norm = make_norm(cfg.norm, cfg.d_model) if cfg.norm_position == "pre" else None

    def embed_tokens(self, ids, start_pos=0):
        """ids (B,T) -> (B,T,D) = E[ids] * sqrt(D) + PE[start_pos ..]"""
        x = self.embed(ids) * math.sqrt(self.cfg.d_model)
        return self.pos(x, start_pos) if self.pos is not None else x

    def run_layers(self, x, blocked, caches=None, start_pos=0):
        """x (B,T,D) -> h (B,T,D): every layer (causal), then the final norm."""
        for i, layer in enumerate(self.layers):
            x = layer(x, blocked, caches[i] if caches is not None else None, start_pos, causal=True)
        return self.norm(x) if self.norm is not None else x

    def forward(self, tokens):
        """tokens (B,T) -> logits (B,T,V), position t predicting token t + 1 (no padding mask: padding
        sits after every token that counts)"""
        T = tokens.shape[1]
        return self.run_layers(self.embed_tokens(tokens), causal_mask(T, T)) @ self.embed.weight.t()

    def start_decoding(self, prompt):
        """prompt (B,P), P >= 1, no padding -> the state holding positions 0..P-2 (the prefill); the
        first decode_step reads the prompt's last token."""
        P = prompt.shape[1]
        state = DecoderOnlyState(len(self.layers), prompt[:, P - 1:])
        if P > 1:
            self.run_layers(self.embed_tokens(prompt[:, :P - 1]), causal_mask(P - 1, P - 1), state.caches)
        return state

    def decode_step(self, tokens, state):
        """tokens (B,1) at position state.length() -> logits (B,V)"""
        start_pos = state.length()
        if start_pos >= self.cfg.max_len:
            raise ValueError(f"DecoderOnlyTransformer: position {start_pos} is beyond max_len {self.cfg.max_len}")
        h = self.run_layers(self.embed_tokens(tokens, start_pos), None, state.caches, start_pos)
        return (h @ self.embed.weight.t())[:, 0]


class EncoderOnlyTransformer(nn.Module):
    """BERT's shape: the encoder over E[ids] * sqrt(D) + PE, then the masked-LM head h E^T (num_classes
    0) or a classifier (Linear D -> C with bias) on the mean over non-padding tokens or the first
    token. Parameters embed.weight, pos.weight (learned), encoder.*, classifier.* (classification).
    It does not generate."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.src_vocab, cfg.d_model, padding_idx=cfg.pad_id)
        self.pos = make_positions(cfg)
        self.encoder = Encoder(cfg)
        if cfg.num_classes > 0:
            self.classifier = nn.Linear(cfg.d_model, cfg.num_classes)

    def encode(self, src):
        """src (B,S) -> h (B,S,D), padding keys blocked"""
        x = self.embed(src) * math.sqrt(self.cfg.d_model)
        x = self.pos(x, 0) if self.pos is not None else x
        return self.encoder(x, padding_mask(src, self.cfg.pad_id))

    def forward(self, src):
        """src (B,S) -> logits (B,S,V) (masked LM) or (B,C) (classifier)"""
        h = self.encode(src)
        if self.cfg.num_classes == 0:
            return h @ self.embed.weight.t()
        if self.cfg.pooling == "cls":
            return self.classifier(h[:, 0])
        keep = (src != self.cfg.pad_id).to(h.dtype)[:, :, None]                   # (B,S,1)
        return self.classifier((h * keep).sum(1) / keep.sum(1))


# ---------------------------------------------------------------------------------------------
# The recurrent encoder-decoder (nn/rnn_seq2seq.cpp, arch rnn): what the Transformer replaced
# ---------------------------------------------------------------------------------------------

RNN_CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}  # nn.RNN's default nonlinearity is tanh


class RnnDecodeState:
    """What greedy decoding keeps for B rows of the recurrent model: the encoder's states, the keys the
    decoder scores against, the source padding, the decoder's state after the steps so far (PyTorch's
    hx: h (layers,B,D), or (h, c) for an LSTM), and <s> for each row's first decode_step. The recurrent
    state plays the KV cache's part: it does not grow with the steps."""

    def __init__(self, enc, keys, blocked, hx, first_tokens):
        self.enc, self.keys, self.blocked = enc, keys, blocked           # (B,S,D), (B,S,D), bool (B,S)
        self.hx = hx                                                     # (L,B,D) or ((L,B,D), (L,B,D))
        self.first_tokens = first_tokens                                 # (B,1)
        self.steps = 0

    def length(self):
        """Target positions decoded so far."""
        return self.steps


class RnnSeq2Seq(nn.Module):
    """The recurrent encoder-decoder (Bahdanau et al. 2014, Luong et al. 2015), on torch.nn.LSTM / GRU /
    RNN. Scratchformer's Recurrent names and lays out its weights as these modules do, so registered
    under Scratchformer's module names their state_dict keys are its parameter names (encoder.weight_ih_l0,
    encoder.weight_ih_l0_reverse, decoder.bias_hh_l1, ...). L = decoder_layers.

        encoder   E_src[src] * sqrt(D) -> a bidirectional stack of encoder_layers, D/2 units per direction, read
                  through pack_padded_sequence: a row's padding (at its end) is never read, its
                  outputs are zero; enc (B,S,D) = both directions side by side
        bridge    s_0 = tanh(W_b [h_fwd_last; h_bwd_first] + b_b) (B, D*L), from the top encoder layer's
                  final states (the forward one after the row's last real token, the reverse one after
                  its first); columns l*D..(l+1)*D are decoder layer l's h_0; an LSTM's c_0 = 0
        decoder   one direction, L layers of D units, stepped one token at a time (teacher forcing
                  feeds the gold y_{t-1}); y = E_tgt[y_{t-1}] * sqrt(D) (no positions)
                    additive  c_t = attend(s_{t-1}), then s_t = cell([y; c_t], s_{t-1})
                    dot       s_t = cell(y, s_{t-1}), then c_t = attend(s_t)
                    general   as dot
                    none      s_t = cell(y, s_{t-1}); no c_t (s_0 carries the whole source)
                  s_{t-1}, s_t: the top layer's h
        output    o_t = tanh(combine([s_t; c_t])) (combine(s_t) for none), logits_t = out_proj(o_t)

    attend(q): e_i = score(q, enc_i) over the source positions, padding blocked (-inf), alpha =
    softmax(e), c = sum_i alpha_i enc_i, with
        additive  e_i = score_v . tanh(query_proj(q) + key_proj(enc_i))
        dot       e_i = q . enc_i
        general   e_i = q . key_proj(enc_i)
    The keys key_proj(enc) are computed once per sentence (start_decoding), as the C++ does.
    Parameters, registered in Scratchformer's order: src_embed, tgt_embed, encoder.*, bridge, decoder.*,
    query_proj, key_proj and score_v (D) (additive; key_proj alone for general), combine (2D or D -> D,
    with bias), out_proj (D -> V, with bias). score_v, the model's own parameter, lists first in
    state_dict(), as in a Scratchformer checkpoint: both list a module's own parameters before its
    children's. Dropout sits where the C++ has it, on the scaled embeddings E_src[src] sqrt(D) and
    y, and on o before out_proj, with probability `dropout` in training; it defaults to 0 (no dropout,
    the same numbers as without it): this file evaluates, and the reference cases train without it.
    tools/bench_pytorch_rnn.py passes the config's model.dropout."""

    def __init__(self, cfg, dropout=0.0):
        super().__init__()
        self.cfg = cfg
        D, L = cfg.d_model, cfg.decoder_layers
        cell = RNN_CELLS[cfg.rnn_cell]
        additive = cfg.rnn_attention == "additive"
        self.src_embed = nn.Embedding(cfg.src_vocab, D, padding_idx=cfg.pad_id)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab, D, padding_idx=cfg.pad_id)
        self.encoder = cell(D, D // 2, num_layers=cfg.encoder_layers, bidirectional=True, batch_first=True)
        self.bridge = nn.Linear(D, D * L)
        # Bahdanau's decoder reads the context with the previous word: input [y; c] (2D).
        self.decoder = cell(2 * D if additive else D, D, num_layers=L, batch_first=True)
        if additive:
            self.query_proj = nn.Linear(D, D, bias=False)
            self.key_proj = nn.Linear(D, D, bias=False)
            self.score_v = nn.Parameter(torch.empty(D).normal_(0.0, 1.0 / math.sqrt(D)))  # as the C++ draws it
        elif cfg.rnn_attention == "general":
            self.key_proj = nn.Linear(D, D, bias=False)
        self.combine = nn.Linear(D if cfg.rnn_attention == "none" else 2 * D, D)
        self.out_proj = nn.Linear(D, cfg.tgt_vocab)
        self.dropout = nn.Dropout(dropout)  # no parameters: state_dict() is the same for any value

    def encode(self, src):
        """src (B,S), each row padded with pad_id at its end, at least one real token -> enc (B,S,D), and the
        top encoder layer's final states h_fwd, h_bwd (B,D/2) each"""
        S = src.shape[1]
        lengths = (src != self.cfg.pad_id).sum(dim=1)                              # (B)
        if bool((lengths == 0).any()):
            raise ValueError("RnnSeq2Seq: a source row is all padding; expected at least one real token per row")
        x = self.dropout(self.src_embed(src) * math.sqrt(self.cfg.d_model))           # E[src] sqrt(D): (B,S,D)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, state = self.encoder(packed)
        enc, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=S)  # (B,S,D), padding 0
        h_n = state[0] if self.cfg.rnn_cell == "lstm" else state                 # (layers*2,B,D/2)
        return enc, h_n[-2], h_n[-1]  # the top layer's forward, then reverse state

    def initial_state(self, h_fwd, h_bwd):
        """The top encoder layer's final states (B,D/2) each -> the decoder's hx: h_0 (L,B,D), with c_0 = 0
        for an LSTM. s_0 = tanh(W_b [h_fwd; h_bwd] + b_b) (B, D*L), layer l's h_0 its columns l*D.."""
        B, D, L = h_fwd.shape[0], self.cfg.d_model, self.cfg.decoder_layers
        s0 = torch.tanh(self.bridge(torch.cat([h_fwd, h_bwd], dim=1)))           # (B,D*L)
        h0 = s0.reshape(B, L, D).transpose(0, 1).contiguous()                    # (L,B,D)
        return (h0, torch.zeros_like(h0)) if self.cfg.rnn_cell == "lstm" else h0

    def keys_of(self, enc):
        """enc (B,S,D) -> the keys scored against (B,S,D): key_proj(enc) (additive, general), enc (dot)"""
        return self.key_proj(enc) if self.cfg.rnn_attention in ("additive", "general") else enc

    def attend(self, q, enc, keys, blocked):
        """q (B,D), enc and keys (B,S,D), blocked bool (B,S) TRUE = padding -> alpha (B,S), c (B,D)"""
        if self.cfg.rnn_attention == "additive":
            scores = torch.tanh(self.query_proj(q)[:, None, :] + keys) @ self.score_v  # (B,S,D) . (D) -> (B,S)
        else:
            scores = (keys @ q[:, :, None])[:, :, 0]                                  # (B,S,D)(B,D,1) -> (B,S)
        alpha = torch.softmax(scores.masked_fill(blocked, -math.inf), dim=-1)         # (B,S)
        return alpha, (alpha[:, None, :] @ enc)[:, 0]                                # (B,1,S)(B,S,D) -> (B,D)

    def top_state(self, hx):
        """The decoder's hx -> the top layer's h (B,D)"""
        return (hx[0] if self.cfg.rnn_cell == "lstm" else hx)[-1]

    def decoder_step(self, y_prev, hx, enc, keys, blocked):
        """y_prev (B) ids, hx the decoder's state -> logits (B,V), the new hx, alpha (B,S) or None (none)"""
        o, hx, alpha = self.decoder_output(y_prev, hx, enc, keys, blocked)
        return self.out_proj(self.dropout(o)), hx, alpha

    def decoder_output(self, y_prev, hx, enc, keys, blocked):
        """decoder_step before the output projection: y_prev (B) ids, hx -> o (B,D), the new hx, alpha (B,S)
        or None (none). o does not feed the recurrence, so a caller may project all T of them at once."""
        y = self.dropout(self.tgt_embed(y_prev) * math.sqrt(self.cfg.d_model))        # (B,D)
        alpha = context = None
        if self.cfg.rnn_attention == "additive":  # the previous state asks; the answer is read with y
            alpha, context = self.attend(self.top_state(hx), enc, keys, blocked)
            out, hx = self.decoder(torch.cat([y, context], dim=1)[:, None, :], hx)    # (B,1,D)
        else:
            out, hx = self.decoder(y[:, None, :], hx)                                 # (B,1,D)
            if self.cfg.rnn_attention != "none":  # dot, general: the new state asks
                alpha, context = self.attend(out[:, 0], enc, keys, blocked)
        s = out[:, 0]                                                                 # (B,D)
        o = torch.tanh(self.combine(s if context is None else torch.cat([s, context], dim=1)))  # (B,D)
        return o, hx, alpha

    def run_decoder(self, tgt_in, hx, enc, keys, blocked):
        """tgt_in (B,T) from the state hx -> logits (B,T,V), alpha (B,T,S) or None: the decoder stepped T
        times, position t waiting for t - 1 (teacher forcing)."""
        logits, alphas = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, hx, alpha = self.decoder_step(tgt_in[:, t], hx, enc, keys, blocked)
            logits.append(step_logits)
            alphas.append(alpha)
        weights = torch.stack(alphas, dim=1) if self.cfg.rnn_attention != "none" else None
        return torch.stack(logits, dim=1), weights

    def forward(self, src, tgt_in):
        """src (B,S), tgt_in (B,T) = <s> y -> logits (B,T,V), teacher forcing"""
        enc, h_fwd, h_bwd = self.encode(src)
        logits, _ = self.run_decoder(tgt_in, self.initial_state(h_fwd, h_bwd), enc, self.keys_of(enc),
                                     src == self.cfg.pad_id)
        return logits

    def alignment(self, src, tgt_in):
        """src (B,S), tgt_in (B,T) -> the attention weights (B,T,S) of every target position over the source
        (teacher-forced); rnn_attention none has none (ValueError)."""
        if self.cfg.rnn_attention == "none":
            raise ValueError("RnnSeq2Seq.alignment: rnn_attention is none, so there is no alignment")
        enc, h_fwd, h_bwd = self.encode(src)
        _, weights = self.run_decoder(tgt_in, self.initial_state(h_fwd, h_bwd), enc, self.keys_of(enc),
                                      src == self.cfg.pad_id)
        return weights

    def start_decoding(self, src):
        """src (B,S) padded -> the state; each row's first decode_step reads <s>."""
        enc, h_fwd, h_bwd = self.encode(src)
        bos = torch.full((src.shape[0], 1), self.cfg.bos_id, dtype=torch.int64)
        return RnnDecodeState(enc, self.keys_of(enc), src == self.cfg.pad_id, self.initial_state(h_fwd, h_bwd), bos)

    def decode_step(self, tokens, state):
        """tokens (B,1), each row's newest token -> logits (B,V); the state moves one step on"""
        logits, state.hx, _ = self.decoder_step(tokens[:, 0], state.hx, state.enc, state.keys, state.blocked)
        state.steps += 1
        return logits


def make_model(cfg):
    """The model of cfg.arch (its weights still to be loaded)."""
    cls = {"encoder-decoder": Seq2SeqTransformer, "decoder-only": DecoderOnlyTransformer,
           "encoder-only": EncoderOnlyTransformer, "rnn": RnnSeq2Seq}[cfg.arch]
    return cls(cfg)


# ---------------------------------------------------------------------------------------------
# Loading a checkpoint (or a .pt written by to-torch) into the model
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class LoadedModel:
    model: nn.Module   # in eval mode, float32
    config_toml: str   # the checkpoint's config, as stored
    settings: dict     # the config parsed (parse_config)
    src_vocab: int
    tgt_vocab: int
    path: str          # where it came from


def vocab_sizes_of(arch, weights):
    """(src_vocab, tgt_vocab) read off the embedding and output tables, for a file that records none."""
    if arch not in SOURCE_READING_ARCHS:
        rows = weights["embed.weight"].shape[0] if "embed.weight" in weights else 0
        return rows, rows
    src = weights["src_embed.weight"].shape[0] if "src_embed.weight" in weights else 0
    for name in ("tgt_embed.weight", "output_proj.weight", "out_proj.weight"):
        if name in weights:
            return src, weights[name].shape[0]
    return src, src


def recorded_int(metadata, key, origin):
    if key not in metadata:
        return None
    try:
        return int(metadata[key])
    except ValueError:
        raise ToolError(f"{origin}: metadata {key!r} should be an integer, found {metadata[key]!r}") from None


def build_model(config_toml, weights, src_vocab, tgt_vocab, origin, float32_only):
    """The model of the config, its parameters set from weights (name -> tensor; every parameter, no
    other tensor, each of its shape: checked here, so the message is one line), in eval mode.
    float32_only: refuse other dtypes, as Scratchformer does (a checkpoint); else convert floats
    (a PyTorch state dict)."""
    settings = parse_config(config_toml, origin)
    arch = settings["model"]["arch"]
    shape_src, shape_tgt = vocab_sizes_of(arch, weights)
    src_vocab = shape_src if src_vocab is None else src_vocab
    tgt_vocab = shape_tgt if tgt_vocab is None else tgt_vocab
    try:
        cfg = model_config_from(settings, src_vocab, tgt_vocab)
    except ToolError as e:
        raise ToolError(f"{origin}: {e}") from None
    model = make_model(cfg)
    expected = model.state_dict()
    for name, t in expected.items():
        if name not in weights:
            raise ToolError(f"{origin}: tensor {name!r} of shape {list(t.shape)} is missing (the config's "
                            f"{arch} model has {len(expected)} parameters)")
        if tuple(weights[name].shape) != tuple(t.shape):
            raise ToolError(f"{origin}: tensor {name!r} has shape {list(weights[name].shape)}, the config's model "
                            f"expects {list(t.shape)}")
        dtype = weights[name].dtype
        if dtype != torch.float32 and (float32_only or not weights[name].is_floating_point()):
            raise ToolError(f"{origin}: tensor {name!r} is {dtype}, expected float32 (Scratchformer's weights)")
    for name in weights:
        if name not in expected:
            raise ToolError(f"{origin}: unexpected tensor {name!r} (not a parameter of the config's {arch} model)")
    model.load_state_dict({name: weights[name].to(torch.float32) for name in expected}, strict=True)
    model.eval()
    return LoadedModel(model, config_toml, settings, cfg.src_vocab or cfg.tgt_vocab, cfg.tgt_vocab, origin)


def load_checkpoint(path, verify=True):
    """A Scratchformer checkpoint (the weights; optimizer.* tensors are skipped) -> LoadedModel."""
    tensors, metadata = read_safetensors(path, verify)
    if metadata.get(FORMAT_KEY, FORMAT) != FORMAT:
        raise ToolError(f"{path}: checkpoint format {metadata[FORMAT_KEY]!r}, expected {FORMAT!r}")
    if "config" not in metadata:
        raise ToolError(f"{path}: metadata key 'config' is missing (expected a Scratchformer checkpoint: the "
                        "model's config as TOML)")
    weights = {name: t for name, t in tensors.items() if not name.startswith("optimizer.")}
    return build_model(metadata["config"], weights, recorded_int(metadata, "src_vocab", path),
                       recorded_int(metadata, "tgt_vocab", path), path, float32_only=True)


def load_torch(path):
    """A .pt written by to-torch ({"config", "src_vocab", "tgt_vocab", "state_dict"}) -> LoadedModel."""
    if not os.path.isfile(path):
        raise ToolError(f"{path}: file not found (expected a .pt written by to-torch)")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several kinds for a file that is not its format
        raise ToolError(f"{path}: not a PyTorch file torch.load can read ({str(e).splitlines()[0]})") from None
    keys = ("config", "src_vocab", "tgt_vocab", "state_dict")
    if not isinstance(saved, dict) or any(k not in saved for k in keys):
        found = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
        raise ToolError(f"{path}: expected a dict with keys {', '.join(keys)} (written by to-torch), found {found}")
    return build_model(saved["config"], dict(saved["state_dict"]), int(saved["src_vocab"]), int(saved["tgt_vocab"]),
                       path, float32_only=False)


def load_any(args):
    """--checkpoint F or --torch model.pt -> LoadedModel, in args.dtype."""
    if bool(args.checkpoint) == bool(args.torch):
        raise ToolError("expected exactly one of --checkpoint FILE.safetensors and --torch FILE.pt")
    loaded = load_checkpoint(args.checkpoint, not args.skip_checksum) if args.checkpoint else load_torch(args.torch)
    loaded.model.to(DTYPES[args.dtype])
    return loaded


# ---------------------------------------------------------------------------------------------
# Tokenizers and input lines (train/setup.cpp load_tokenizers, train/cli/cli_util.cpp)
# ---------------------------------------------------------------------------------------------

class Tokenizer:
    """A Scratchformer SentencePiece model: ids 0 <pad>, 1 <unk>, 2 <s>, 3 </s>, then task symbols."""

    def __init__(self, path):
        import sentencepiece  # only the commands that tokenise need it
        self.path = path
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)
        special = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id())
        if special != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ToolError(f"{path}: expected the special ids <pad> 0, <unk> 1, <s> 2, </s> 3, found {special}")

    def vocab_size(self):
        return self.sp.get_piece_size()

    def encode(self, text):
        """str -> ids, without <s> or </s>"""
        return self.sp.encode(text)

    def decode(self, ids):
        """ids -> str; <pad>, <s> and </s> skipped (Tokenizer::decode)"""
        return self.sp.decode([i for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID)])

    def symbol_id(self, symbol):
        """The id of a task symbol such as <sep> (a control piece after </s>)."""
        i = self.sp.piece_to_id(symbol)
        if i <= EOS_ID or not self.sp.is_control(i):
            raise ToolError(f"{self.path}: the tokenizer has no {symbol} symbol (trained for another task)")
        return i


def load_tokenizers(loaded, directory):
    """-> (source tokenizer, target tokenizer) from directory: spm.model (data.joint_tokenizer, or a task
    other than translation), else spm.src.model and spm.tgt.model. Their sizes must be the model's."""
    data = loaded.settings["data"]
    if data["joint_tokenizer"] or data["task"] != "translation":
        names = ["spm.model", "spm.model"]
    else:
        names = ["spm.src.model", "spm.tgt.model"]
    tokenizers = []
    for name in names:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise ToolError(f"no tokenizer beside the model: expected {path} (data.joint_tokenizer = "
                            f"{str(data['joint_tokenizer']).lower()}, data.task = {data['task']!r})")
        tokenizers.append(Tokenizer(path))
    src, tgt = tokenizers
    if (src.vocab_size(), tgt.vocab_size()) != (loaded.src_vocab, loaded.tgt_vocab):
        raise ToolError(f"{loaded.path}: the tokenizer in {directory} has vocabulary {src.vocab_size()}/"
                        f"{tgt.vocab_size()} but the model {loaded.src_vocab}/{loaded.tgt_vocab}")
    return src, tgt


def read_lines(path, strict):
    """A file (or stdin for None / "-") -> its lines as bytes, without "\\n" or "\\r\\n", a leading
    byte-order mark removed. strict: a line that is not UTF-8 is an error (data::read_lines, what eval
    reads), else it is kept and encode_inputs reports it (read_input_lines, what translate reads)."""
    if path in (None, "", "-"):
        blob = sys.stdin.buffer.read()
    else:
        if not os.path.isfile(path):
            raise ToolError(f"input file not found: {path}")
        with open(path, "rb") as f:
            blob = f.read()
    if blob.startswith(b"\xef\xbb\xbf"):
        blob = blob[3:]
    lines = blob.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    if strict:
        for i, line in enumerate(lines):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ToolError(f"{path} line {i + 1}: invalid UTF-8 at byte {e.start + 1}") from None
    return lines


def warn(message):
    print(f"{PROGRAM}: warning: {message}", file=sys.stderr)


def encode_inputs(lines, tok, max_tokens, origin):
    """Lines (bytes) -> ids, as encode_inputs (train/cli/cli_util.cpp): a line that is not UTF-8 gives []
    (an empty translation); a huge line is cut to max_tokens * 256 bytes at a character boundary before
    tokenising; more than max_tokens tokens are cut to max_tokens."""
    ids = []
    for i, line in enumerate(lines):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            warn(f"{origin} line {i + 1}: invalid UTF-8 at byte {e.start + 1}; writing an empty translation")
            ids.append([])
            continue
        text = line
        max_bytes = max_tokens * MAX_BYTES_PER_TOKEN
        if len(text) > max_bytes:
            cut = max_bytes
            while cut > 0 and (text[cut] & 0xC0) == 0x80:  # not inside a character
                cut -= 1
            text = text[:cut]
        row = tok.encode(text.decode("utf-8"))
        if len(row) > max_tokens or len(text) < len(line):
            warn(f"{origin} line {i + 1}: {'over ' if len(text) < len(line) else ''}{len(row)} tokens, truncated "
                 f"to the model's limit of {max_tokens}")
            row = row[:max_tokens]
        ids.append(row)
    return ids


def max_source_tokens(loaded):
    """The longest source translate and eval take (train/setup.cpp max_source_tokens): max_len for the
    encoder-decoder (the source carries no <s> or </s>), half the positions for a decoder-only model
    (its prompt <s> source <sep> and the translation share them)."""
    max_len = loaded.settings["model"]["max_len"]
    return max_len // 2 - 1 if loaded.settings["model"]["arch"] == "decoder-only" else max_len


def a_or_an(word):
    return ("an " if word[0] in "aeiou" else "a ") + word


def require_task(loaded, command, task, archs):
    """ToolError unless the model is one of archs trained with data.task = task (train/task.cpp
    require_model)."""
    arch, found = loaded.settings["model"]["arch"], loaded.settings["data"]["task"]
    if found != task or arch not in archs:
        raise ToolError(f"{command} needs {a_or_an(' or '.join(archs))} model trained with data.task = {task!r}, "
                        f"but {loaded.path} holds {a_or_an(arch)} model trained with data.task = {found!r}")


# ---------------------------------------------------------------------------------------------
# Greedy decoding (train/eval/decode.cpp greedy_decode, train/eval/evaluate.cpp translate_all)
# ---------------------------------------------------------------------------------------------

MAX_LEN_A, MAX_LEN_B = 1.5, 10  # DecodeOptions: at most ceil(a * source length) + b tokens
SENTENCES_PER_BATCH = 64        # translate_all's batches


def max_target_length(cfg, src_len):
    """Generated tokens allowed (</s> included) for a source of src_len tokens: ceil(1.5 S) + 10, at
    least 1, at most max_len - 1 (the decoder input holds <s> and the generated tokens)."""
    return min(max(math.ceil(MAX_LEN_A * src_len) + MAX_LEN_B, 1), cfg.max_len - 1)


def allowed_argmax(logits, pad_id):
    """logits (B,V) -> (B) the most likely token that is neither padding nor <s> (the first of equal
    ones); </s> when none is finite."""
    allowed = logits.nan_to_num(nan=-math.inf)
    allowed[:, [pad_id, BOS_ID]] = -math.inf
    best = allowed.argmax(dim=1)
    return torch.where(allowed.max(dim=1).values > -math.inf, best, torch.full_like(best, EOS_ID))


@torch.no_grad()
def greedy_decode(model, src):
    """src (B,S) int64: the encoder-decoder's sources padded with pad_id, or a decoder-only model's
    prompts <s> x <sep> (all of one length) -> B lists of generated ids without <s> and </s>.
    A row stops at </s> or at its length limit; a finished row decodes on with the batch, its output
    frozen (as the C++ does: the rows do not interact)."""
    cfg = model.cfg
    state = model.start_decoding(src)
    room = max(1, cfg.max_len - 1 - state.length())  # a decoder-only prompt takes positions
    limits = [min(room, max_target_length(cfg, n)) for n in (src != cfg.pad_id).sum(dim=1).tolist()]
    tokens = state.first_tokens                                                    # (B,1)
    out, done = [[] for _ in limits], [False] * len(limits)
    for _ in range(max(limits)):
        best = allowed_argmax(model.decode_step(tokens, state), cfg.pad_id).tolist()  # (B)
        for b, token in enumerate(best):
            if done[b]:
                continue
            if token == EOS_ID:
                done[b] = True
            else:
                out[b].append(token)
                done[b] = len(out[b]) >= limits[b]
        if all(done):
            break
        tokens = torch.tensor(best, dtype=torch.int64)[:, None]
    return out


def pad_rows(rows, pad_id):
    """Lists of ids -> (B, max length) int64 padded with pad_id (pad_batch; at least one column)."""
    width = max([1] + [len(r) for r in rows])
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.int64)


def translate_all(loaded, src_tok, tgt_tok, sources):
    """Source ids (non-empty) -> detokenised translations in the same order. Sorted by length (stable)
    into batches of 64, as translate_all: the encoder-decoder and rnn pad; a decoder-only model reads
    <s> source <sep> and batches only sources of one length (it has no padding mask)."""
    model = loaded.model
    prompted = model.cfg.arch == "decoder-only"
    sep = src_tok.symbol_id("<sep>") if prompted else None
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out = [None] * len(sources)
    start = 0
    while start < len(order):
        end = min(len(order), start + SENTENCES_PER_BATCH)
        if prompted:
            end = next((k for k in range(start, end) if len(sources[order[k]]) != len(sources[order[start]])), end)
        rows = [[BOS_ID] + sources[i] + [sep] if prompted else sources[i] for i in order[start:end]]
        for i, ids in zip(order[start:end], greedy_decode(model, pad_rows(rows, model.cfg.pad_id))):
            out[i] = tgt_tok.decode(ids)
        start = end
    return out


# ---------------------------------------------------------------------------------------------
# Teacher-forced NLL (train/task.cpp evaluate_task without label smoothing; which pairs count:
# train/cli/cmd_eval.cpp fitting_pairs, train/training_data.cpp load_text_split)
# ---------------------------------------------------------------------------------------------

def fitting_pairs(loaded, src_ids, refs, tgt_tok):
    """eval's pairs: ids of the (truncated) sources, reference lines (bytes) -> [(source ids, target
    ids)] for the pairs with a non-empty source, a reference of at most max_len * 256 bytes whose ids
    are non-empty and at most max_len - 2, and (decoder-only) source + target + 2 <= max_len."""
    max_len, decoder_only = loaded.settings["model"]["max_len"], loaded.settings["model"]["arch"] == "decoder-only"
    pairs = []
    for src, ref in zip(src_ids, refs):
        if not src or len(ref) > max_len * MAX_BYTES_PER_TOKEN:
            continue
        tgt = tgt_tok.encode(ref.decode("utf-8"))
        if not tgt or len(tgt) > max_len - 2 or (decoder_only and len(src) + len(tgt) + 2 > max_len):
            continue
        pairs.append((src, tgt))
    return pairs


def lm_lines(loaded, lines, tok):
    """eval --input's lines for an lm model (load_text_split): at most (max_len - 2) * 256 bytes, ids
    non-empty and at most max_len - 2 -> [ids]."""
    max_tokens = loaded.settings["model"]["max_len"] - 2
    kept = []
    for line in lines:
        if len(line) > max_tokens * MAX_BYTES_PER_TOKEN:
            continue
        ids = tok.encode(line.decode("utf-8"))
        if ids and len(ids) <= max_tokens:
            kept.append(ids)
    return kept


def decoder_rows(arch, src, tgt, sep):
    """One example -> (encoder input or None, decoder input, targets) as data/tasks.cpp builds them:
        encoder-decoder  src;   <s> y;            y </s>                  (and rnn)
        decoder-only     None;  <s> x <sep> y;    pad x (m+1), y </s>     (translation, sep given)
        lm               None;  <s> x;            x </s>                  (src None, tgt = x)"""
    if arch in SOURCE_READING_ARCHS:
        return src, [BOS_ID] + tgt, tgt + [EOS_ID]
    if src is None:
        return None, [BOS_ID] + tgt, tgt + [EOS_ID]
    return None, [BOS_ID] + src + [sep] + tgt, [PAD_ID] * (len(src) + 1) + tgt + [EOS_ID]


NLL_BATCH_TOKENS = 4096  # rows * longest row per batch: bounds the (B,T,V) logits


@torch.no_grad()
def teacher_forced_nll(model, examples):
    """examples: [(encoder input or None, decoder input, targets)] -> (target tokens, sum of
    -log p(target)) over every target that is not padding, in float64 from the model's logits."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][1]))
    tokens, nll_sum, start = 0, 0.0, 0
    while start < len(order):
        end = start + 1
        while end < len(order) and (end + 1 - start) * len(examples[order[end]][1]) <= NLL_BATCH_TOKENS:
            end += 1
        batch = [examples[i] for i in order[start:end]]
        tgt_in = pad_rows([b[1] for b in batch], PAD_ID)                       # (B,T)
        tgt_out = pad_rows([b[2] for b in batch], PAD_ID)                      # (B,T)
        if model.cfg.arch in SOURCE_READING_ARCHS:
            logits = model(pad_rows([b[0] for b in batch], PAD_ID), tgt_in)    # (B,T,V)
        else:
            logits = model(tgt_in)
        logp = torch.log_softmax(logits.double(), dim=-1).gather(-1, tgt_out[..., None])[..., 0]  # (B,T)
        counted = tgt_out != PAD_ID
        tokens += int(counted.sum())
        nll_sum -= float(logp[counted].sum())
        start = end
    return tokens, nll_sum


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------

def tokenizer_dir(args):
    return args.tokenizer_dir or os.path.dirname(os.path.abspath(args.checkpoint or args.torch))


def run_nll(args):
    loaded = load_any(args)
    arch, task = loaded.settings["model"]["arch"], loaded.settings["data"]["task"]
    if task == "lm":
        require_task(loaded, "nll", "lm", ["decoder-only"])
        if not args.input or args.src or args.ref:
            raise ToolError("an lm model takes --input FILE (one sentence per line), not --src/--ref")
        src_tok, tgt_tok = load_tokenizers(loaded, tokenizer_dir(args))
        kept = lm_lines(loaded, read_lines(args.input, strict=True), tgt_tok)[:args.limit]
        examples = [decoder_rows(arch, None, ids, None) for ids in kept]
        what = "lines"
    else:
        require_task(loaded, "nll", "translation", ["encoder-decoder", "rnn", "decoder-only"])
        if not (args.src and args.ref) or args.input:
            raise ToolError("a translation model takes --src FILE and --ref FILE (not --input)")
        src_tok, tgt_tok = load_tokenizers(loaded, tokenizer_dir(args))
        sources, refs = read_lines(args.src, strict=True), read_lines(args.ref, strict=True)
        if len(sources) != len(refs):
            raise ToolError(f"{args.src} has {len(sources)} lines but {args.ref} has {len(refs)}")
        if not sources:
            raise ToolError(f"empty corpus: {args.src} and {args.ref} have no lines")
        src_ids = encode_inputs(sources, src_tok, max_source_tokens(loaded), args.src)
        pairs = fitting_pairs(loaded, src_ids, refs, tgt_tok)[:args.limit]
        sep = src_tok.symbol_id("<sep>") if arch == "decoder-only" else None
        examples = [decoder_rows(arch, src, tgt, sep) for src, tgt in pairs]
        what = "pairs"
    if not examples:
        raise ToolError(f"no {what[:-1]} fits the model (max_len {loaded.settings['model']['max_len']})")
    tokens, nll_sum = teacher_forced_nll(loaded.model, examples)
    print(json.dumps({what: len(examples), "tokens": tokens, "nll_sum": nll_sum, "nll_per_token": nll_sum / tokens}))
    return 0


def run_translate(args):
    loaded = load_any(args)
    require_task(loaded, "translate", "translation", ["encoder-decoder", "rnn", "decoder-only"])
    src_tok, tgt_tok = load_tokenizers(loaded, tokenizer_dir(args))
    lines = read_lines(args.input, strict=False)[:args.limit]
    ids = encode_inputs(lines, src_tok, max_source_tokens(loaded), args.input or "stdin")
    nonempty = [i for i, row in enumerate(ids) if row]
    out = [""] * len(ids)
    for i, text in zip(nonempty, translate_all(loaded, src_tok, tgt_tok, [ids[i] for i in nonempty])):
        out[i] = text
    sys.stdout.buffer.write("".join(line + "\n" for line in out).encode("utf-8"))
    return 0


def make_parent_dir(path):
    """Creates the directory an output file goes into (as `scratchformer` does for run.dir)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


def run_to_torch(args):
    loaded = load_checkpoint(args.checkpoint, not args.skip_checksum)
    make_parent_dir(args.out)
    torch.save({"config": loaded.config_toml, "src_vocab": loaded.src_vocab, "tgt_vocab": loaded.tgt_vocab,
                "state_dict": loaded.model.state_dict()}, args.out)
    print(f"wrote {args.out}: {len(loaded.model.state_dict())} tensors, {loaded.settings['model']['arch']}")
    return 0


def run_from_torch(args):
    loaded = load_torch(args.torch)
    tensors = [(name, t.to(torch.float32)) for name, t in loaded.model.state_dict().items()]
    metadata = {"config": loaded.config_toml, "src_vocab": loaded.src_vocab, "tgt_vocab": loaded.tgt_vocab,
                FORMAT_KEY: FORMAT, ORIGIN_KEY: EXTERNAL_ORIGIN}
    names = []
    if args.tokenizer_from:  # checked before anything is written
        if not os.path.isdir(args.tokenizer_from):
            raise ToolError(f"--tokenizer-from: {args.tokenizer_from} is not a directory")
        names = sorted(n for n in os.listdir(args.tokenizer_from)
                       if n.startswith("spm") and (n.endswith(".model") or n.endswith(".vocab")))
        if not any(n.endswith(".model") for n in names):
            raise ToolError(f"--tokenizer-from: {args.tokenizer_from} holds no spm*.model")
    make_parent_dir(args.out)
    size = write_safetensors(args.out, tensors, metadata)
    copied = []
    if args.tokenizer_from:
        out_dir = os.path.dirname(os.path.abspath(args.out))
        for name in names:
            if os.path.abspath(os.path.join(args.tokenizer_from, name)) != os.path.join(out_dir, name):
                shutil.copyfile(os.path.join(args.tokenizer_from, name), os.path.join(out_dir, name))
            copied.append(name)
    copied_text = f"; copied {', '.join(copied)}" if copied else ""
    print(f"wrote {args.out}: {len(tensors)} tensors, {size} bytes{copied_text}")
    return 0


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (and exit 2, as argparse's own)."""

    def error(self, message):
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def positive_int(text):
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, found {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, found {text!r}")
    return n


def add_model_options(p):
    p.add_argument("--checkpoint", help="Scratchformer checkpoint (.safetensors)")
    p.add_argument("--torch", help="instead of --checkpoint: a .pt written by to-torch")
    p.add_argument("--tokenizer-dir", help="directory of spm*.model (default: the model file's directory)")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32", help="compute in this dtype (default float32, "
                   "as the C++ runs)")
    p.add_argument("--skip-checksum", action="store_true", help="do not verify the checkpoint's FNV-1a checksum "
                   "(pure Python takes about a second per 10-20 MB)")


def make_parser():
    parser = OneLineParser(prog=PROGRAM, description="Scratchformer's models in plain PyTorch: NLL, greedy "
                           "translation, and checkpoint conversion to and from PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    p = sub.add_parser("nll", help="teacher-forced NLL per target token (no label smoothing), as eval counts it",
                       description="Teacher-forced NLL of the pairs `scratchformer eval` counts (translation: "
                       "--src/--ref; lm: --input). Prints one JSON line.")
    add_model_options(p)
    p.add_argument("--src", help="translation: source sentences, one per line")
    p.add_argument("--ref", help="translation: reference translations, aligned with --src")
    p.add_argument("--input", help="lm: sentences, one per line")
    p.add_argument("--limit", type=positive_int, help="only the first N pairs that count (default: all)")
    p.set_defaults(run=run_nll)

    p = sub.add_parser("translate", help="greedy translation, stdin or --input to stdout",
                       description="Greedy translation as `scratchformer translate --beam 1`: one output line per "
                       "input line, in order.")
    add_model_options(p)
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--limit", type=positive_int, help="only the first N lines (default: all)")
    p.set_defaults(run=run_translate)

    p = sub.add_parser("to-torch", help="checkpoint -> .pt", description="Writes torch.save({config, src_vocab, "
                       "tgt_vocab, state_dict}) of a Scratchformer checkpoint.")
    p.add_argument("--checkpoint", required=True, help="Scratchformer checkpoint (.safetensors)")
    p.add_argument("--out", required=True, help="the .pt to write")
    p.add_argument("--skip-checksum", action="store_true", help="do not verify the checkpoint's checksum")
    p.set_defaults(run=run_to_torch)

    p = sub.add_parser("from-torch", help=".pt -> checkpoint", description="Writes a Scratchformer checkpoint "
                       "(weights, config, vocabulary sizes, checksum; origin external) from a .pt of to-torch's form.")
    p.add_argument("--torch", required=True, help="a .pt with config, src_vocab, tgt_vocab, state_dict")
    p.add_argument("--out", required=True, help="the .safetensors to write")
    p.add_argument("--tokenizer-from", help="copy spm*.model and spm*.vocab from this directory beside --out")
    p.set_defaults(run=run_from_torch)
    return parser


def main(argv):
    args = make_parser().parse_args(argv)
    try:
        return args.run(args)
    except ToolError as e:
        print(f"{PROGRAM} {args.command}: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a file that cannot be read or written: one line, as for every bad input
        print(f"{PROGRAM} {args.command}: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
