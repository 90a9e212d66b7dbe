#!/usr/bin/python3
"""bench_pytorch: the PyTorch side of `scratchformer bench` (train/bench/bench.h).

Builds the same reference model and batch in PyTorch and prints the same fields: a table and
one JSON line (the field names of scratchformer's JSON line, plus torch_threads, blas_threads,
decode_torch_threads, decode_blas_threads, decode_cache_max_abs_diff, bf16_torch_threads,
bf16_settings and settings). Needs nothing beyond Debian's python3-torch (Python 3.11 for tomllib):

    /usr/bin/python3 tools/bench_pytorch.py --config configs/bench.toml [--steps N] [--warmup N]
        [--decode-sentences N] [--json]

A config with model.arch = "rnn" (configs/bench-rnn.toml) is handed to tools/bench_pytorch_rnn.py:
tools/torch_model.py's RnnSeq2Seq (torch.nn.LSTM, dropout where the C++ has it) timed with the same step
and thread settings, a length table (T = 8 ... 128, 1536 target tokens per step), greedy and beam 4
with the recurrent state as the cache, and no bf16 part; its header says the rest. What follows is the
Transformer's.

The model (read from the config's [model], [data] and [train] sections, so it is the one
scratchformer benchmarks): nn.TransformerEncoder / nn.TransformerDecoder built from
nn.TransformerEncoderLayer / nn.TransformerDecoderLayer, post-LN (norm_first=False), ReLU,
dropout 0.1 on the embeddings, sublayer outputs and FFN hidden layer, none on the attention
weights (attention_dropout 0, as scratchformer's config), no final LayerNorm (nn.Transformer
would add one per stack); one embedding table shared by source and target and tied to the
output projection; sinusoidal positions; full attention (attention_window 0); Adam; label
smoothing. Its parameter count is printed and must equal scratchformer's. The batch: 64 pairs of
random ids in [4, V), source and target length 24, no padding. One step: forward, cross-entropy,
backward, clip_grad_norm_, Adam step, zero_grad(set_to_none=True).

Threads: each setting runs in a fresh subprocess with OPENBLAS_NUM_THREADS set in its
environment before torch is imported, and torch.set_num_threads called first thing: torch
threads 1 and 2 crossed with OpenBLAS threads 1 and 2. The setting with the fastest median step
is reported. Decoding picks its own: each setting decodes one greedy batch (a probe), and the
fastest decodes everything, in one more fresh subprocess (its small products can lose badly to
a second thread on a loaded machine).

bf16: after the float32 settings, the same step under torch.autocast("cpu", dtype=torch.bfloat16)
(forward and loss inside the autocast block, backward, clip and Adam outside, as PyTorch
documents; the weights, gradients and Adam state stay float32), again in fresh subprocesses, torch
threads 1 and 2 with OPENBLAS_NUM_THREADS=1 (the bf16 products go through oneDNN, not OpenBLAS);
the faster is PyTorch's bf16 figure (bf16_step_ms, bf16_tokens_per_s; tokens_per_s and the rest stay
the float32 ones). Only on a CPU with bf16 units, read from the /proc/cpuinfo flags: bf16_unit is
"amx-bf16" with amx_bf16 and amx_tile, else "avx512-bf16" with avx512_bf16; without either the bf16
settings are skipped (one line on stderr) and the bf16 fields are null.

The same yardsticks as scratchformer: FLOPs from the same count (training_step_flops below is
train/bench/bench.cpp's, line for line); cblas_sgemm GFLOP/s on the largest product and the BLAS
floor, timed by calling cblas_sgemm of libblas.so.3 (the OpenBLAS torch itself links) through
ctypes on preallocated torch buffers, with the list of sgemm calls of a *scratchformer* step
(training_step_gemms below). So the floor is a common yardstick, not PyTorch's own call list
(which fuses q/k/v into one product and batches attention). ctypes adds about a microsecond per
call; the floor line says how much that is over the whole list.

Peak RSS: resource.getrusage(RUSAGE_SELF).ru_maxrss in the training subprocess, right after the
steps; it includes the torch import (rss_start_mib is the resident size just after it).

Decoding (random model): the sources scratchformer bench wrote to <run.dir>/bench-decode-sources.txt
(token ids of Multi30k test2016, so run scratchformer bench first), batches of 64 sorted by
length, greedy and beam 4 with scratchformer's rules (max length ceil(1.5 S) + 10, pad and BOS
never generated, length penalty 1.0), with a KV cache (written here against the layers'
weights) and without (the whole prefix decoded again and every position projected, the last
kept, as scratchformer's decode.cpp does). The cached step is checked against the uncached
decoder once (decode_cache_max_abs_diff). A random model rarely emits EOS, so compare the
tokens/s as well as the sentences/s. With the KV cache, each batch's time is split in two
(time.perf_counter around each, summed over the batches, in milliseconds: greedy_prefill_ms,
greedy_decode_ms, beam4_prefill_ms, beam4_decode_ms): the prefill, done once per batch (the encoder
over the sources, then every decoder layer's cross-attention K/V from its output), and the decode
(the decoder steps, one token each against the self-attention cache, with the beam bookkeeping).
"""

import argparse
import ctypes
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
import tomllib

PAD, BOS, EOS = 0, 2, 3
FIRST_WORD = 4  # random ids are in [4, V): no special ids, no padding
DECODE_BATCH = 64
DECODE_BEAM = 4
MIN_TIMED_RUNS = 5  # sgemm and floor: at least this many timed runs
GEMM_WARMUP_RUNS = 2
SETTINGS = [(1, 1), (1, 2), (2, 1), (2, 2)]  # (torch threads, OpenBLAS threads)
BF16_SETTINGS = [(1, 1), (2, 1)]  # bf16 autocast: the products go through oneDNN, so OpenBLAS gets 1


# ---- the config --------------------------------------------------------------------------

def load_config(path):
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    m, d, t, r = cfg.get("model", {}), cfg.get("data", {}), cfg.get("train", {}), cfg.get("run", {})
    base = os.path.dirname(os.path.abspath(path))
    model = dict(
        d_model=m.get("d_model", 256), n_heads=m.get("n_heads", 4), n_kv_heads=m.get("n_kv_heads", 0),
        d_ff=m.get("d_ff", 1024), encoder_layers=m.get("encoder_layers", 3), decoder_layers=m.get("decoder_layers", 3),
        dropout=m.get("dropout", 0.1), attention_dropout=m.get("attention_dropout", 0.0),
        activation=m.get("activation", "relu"), norm=m.get("norm", "layernorm"),
        norm_position=m.get("norm_position", "pre"), positional=m.get("positional", "sinusoidal"),
        attention_window=m.get("attention_window", 0), rope_scaling=m.get("rope_scaling", "none"),
        rope_factor=m.get("rope_factor", 1.0),
        share_embeddings=m.get("share_embeddings", True), tie_output=m.get("tie_output", True),
        max_len=m.get("max_len", 256), vocab=d.get("tokenizer_vocab_size", 8000))
    # this script builds the reference architecture only; say so rather than measure another
    want = dict(n_kv_heads=0, activation="relu", norm="layernorm", norm_position="post", positional="sinusoidal",
                attention_window=0, rope_scaling="none", rope_factor=1.0, share_embeddings=True, tie_output=True,
                attention_dropout=0.0)
    for key, value in want.items():
        if model[key] != value:
            sys.exit(f"bench_pytorch: {path}: model.{key} is {model[key]!r}; this script builds the reference "
                     f"model only ({key} = {value!r})")
    return model, train_section(t), run_dir_of(base, r)


def train_section(t):
    """[train] -> what one step reads: the seed, Adam's settings, label smoothing, the clip norm."""
    return dict(seed=t.get("seed", 1), lr=t.get("lr", 1.0), beta1=t.get("beta1", 0.9), beta2=t.get("beta2", 0.98),
                eps=t.get("eps", 1e-9), label_smoothing=t.get("label_smoothing", 0.1),
                clip_norm=t.get("clip_norm", 1.0))


def run_dir_of(base, r):
    """run.dir, relative to the config's directory base."""
    return os.path.normpath(os.path.join(base, r.get("dir", ".")))


def config_arch(path):
    """The config's model.arch (the encoder-decoder unless it says otherwise)."""
    with open(path, "rb") as f:
        return tomllib.load(f).get("model", {}).get("arch", "encoder-decoder")


# ---- FLOPs and the sgemm list (train/bench/bench.cpp's, line for line) ---------------------------

def linear_flops(rows, d_in, d_out):
    return 2 * rows * d_in * d_out


def attention_flops(pairs, tq, tk, dh):
    return pairs * (2 * tq * dh * tk + 2 * tq * tk * dh)


def kv_width(m):
    heads = m["n_kv_heads"] or m["n_heads"]
    return heads * (m["d_model"] // m["n_heads"])


def attention_projection_flops(m, q_rows, kv_rows):
    D = m["d_model"]
    return 2 * linear_flops(q_rows, D, D) + 2 * linear_flops(kv_rows, D, kv_width(m))


def feed_forward_flops(m, rows):
    inputs = 2 if m["activation"] == "swiglu" else 1
    return inputs * linear_flops(rows, m["d_model"], m["d_ff"]) + linear_flops(rows, m["d_ff"], m["d_model"])


def training_step_flops(m, B, S, T):
    """Forward FLOPs by kind; a training step costs 3x the forward (see train/bench/bench.h)."""
    pairs, dh = B * m["n_heads"], m["d_model"] // m["n_heads"]
    Le, Ld = m["encoder_layers"], m["decoder_layers"]
    projections = Le * (attention_projection_flops(m, B * S, B * S) + feed_forward_flops(m, B * S))
    attention = Le * attention_flops(pairs, S, S, dh)
    projections += Ld * (attention_projection_flops(m, B * T, B * T) + attention_projection_flops(m, B * T, B * S)
                         + feed_forward_flops(m, B * T))
    attention += Ld * (attention_flops(pairs, T, T, dh) + attention_flops(pairs, T, S, dh))
    output = linear_flops(B * T, m["d_model"], m["vocab"])
    forward = projections + attention + output
    return dict(projections=projections, attention=attention, output=output, forward=forward, total=3 * forward)


def add_linear(calls, rows, d_in, d_out):
    # (m, n, k, trans_a, trans_b, count)
    calls.append((rows, d_out, d_in, False, True, 1))    # forward x @ W^T
    calls.append((rows, d_in, d_out, False, False, 1))   # grad input g @ W
    calls.append((d_in, d_out, rows, True, False, 1))    # grad weight x^T @ g


def add_attention(calls, pairs, tq, tk, dh):
    calls += [(tq, tk, dh, False, True, pairs), (tq, dh, tk, False, False, pairs),   # q k^T, weights v
              (tq, tk, dh, False, True, pairs), (tk, dh, tq, True, False, pairs),    # grad weights, grad v
              (tq, dh, tk, False, False, pairs), (dh, tk, tq, True, False, pairs)]   # grad q, grad k^T


def add_attention_block(calls, m, B, tq, tk):
    D = m["d_model"]
    add_linear(calls, B * tq, D, D)
    add_linear(calls, B * tk, D, kv_width(m))
    add_linear(calls, B * tk, D, kv_width(m))
    add_attention(calls, B * m["n_heads"], tq, tk, D // m["n_heads"])
    add_linear(calls, B * tq, D, D)


def add_feed_forward(calls, m, rows):
    add_linear(calls, rows, m["d_model"], m["d_ff"])
    if m["activation"] == "swiglu":
        add_linear(calls, rows, m["d_model"], m["d_ff"])
    add_linear(calls, rows, m["d_ff"], m["d_model"])


def training_step_gemms(m, B, S, T):
    calls = []
    for _ in range(m["encoder_layers"]):
        add_attention_block(calls, m, B, S, S)
        add_feed_forward(calls, m, B * S)
    for _ in range(m["decoder_layers"]):
        add_attention_block(calls, m, B, T, T)
        add_attention_block(calls, m, B, T, S)
        add_feed_forward(calls, m, B * T)
    add_linear(calls, B * T, m["d_model"], m["vocab"])
    return calls


def gemm_flops(call):
    m, n, k, _, _, count = call
    return 2 * m * n * k * count


def gemm_shape_str(call):
    m, n, k, ta, tb, _ = call
    return f"{m}x{n}x{k} {'T' if ta else 'N'}{'T' if tb else 'N'}"


# ---- the machine -------------------------------------------------------------------------

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# OpenBLAS's kernels for CPUs without AVX2. Debian's OpenBLAS is built with DYNAMIC_ARCH and picks
# its kernel while it loads, from CPUID's family and model; on a CPU newer than the library it
# falls back to one of these (SSE3 "Prescott"), and torch's float32 matrix products go through it
# too. The rule is scratchformer's own (autograd/runtime/blas_core.h): unless OPENBLAS_CORETYPE is
# set, a CPU with AVX-512 asks for "SkylakeX", one with AVX2 and FMA for "Haswell", so both sides
# of the comparison run the same kernel.
PRE_AVX2_CORES = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge", "Barcelona",
                  "Bobcat", "Bulldozer", "Piledriver", "Unknown"}


def openblas_core():
    """The kernel OpenBLAS chose in this process (the BLAS torch loaded, libblas.so.3), or "unknown"."""
    for name in ("libblas.so.3", "libopenblas.so.0"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "unknown"


def use_native_blas():
    """Before the workers start: sets OPENBLAS_CORETYPE as scratchformer does for itself (above)."""
    if "OPENBLAS_CORETYPE" in os.environ or openblas_core() not in PRE_AVX2_CORES:
        return
    flags = cpu_flags()
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif {"avx2", "fma"} <= flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"


def bf16_unit(flags):
    """The CPU's bf16 unit: "amx-bf16", "avx512-bf16", or None (no bf16 instructions)."""
    if {"amx_bf16", "amx_tile"} <= flags:
        return "amx-bf16"
    if "avx512_bf16" in flags:
        return "avx512-bf16"
    return None


def rss_now_mib():
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def rounded(x, digits):
    return None if x is None or not math.isfinite(x) else round(x, digits)


def fixed(x, digits):
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


# ---- decoding: scratchformer's rules (train/eval/decode.cpp), for any model stepped one token at a time

def limit_of(length, max_len):
    """scratchformer's max_target_length: ceil(1.5 S) + 10 tokens for a source of S, within max_len - 1."""
    return min(max(math.ceil(1.5 * length) + 10, 1), max_len - 1)


def allowed(logits):
    """logits (R,V) -> the same, in place, with pad and BOS never chosen."""
    logits[:, PAD] = float("-inf")
    logits[:, BOS] = float("-inf")
    return logits


def padded_batches(torch, sources):
    """Lists of ids -> (their indices, src (B,S) padded with PAD), DECODE_BATCH at a time, sorted by
    length (stable, as translate_all)."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    for start in range(0, len(order), DECODE_BATCH):
        index = order[start:start + DECODE_BATCH]
        rows = [sources[i] for i in index]
        width = max(len(r) for r in rows)
        yield index, torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


def greedy_search(B, limits, next_logits):
    """Greedy decoding of B rows; limits: each row's limit_of. next_logits(prefixes) -> logits (B,V) for
    the token after each row's prefix (BOS, then what was chosen). A row stops at EOS or at its limit;
    a finished row steps on with the batch, its output frozen. -> B lists of ids, without BOS and EOS."""
    prefixes, out, done = [[BOS] for _ in range(B)], [[] for _ in range(B)], [False] * B
    for _ in range(max(limits)):
        best = allowed(next_logits(prefixes)).argmax(1).tolist()
        for b in range(B):
            if not done[b]:
                if best[b] == EOS:
                    done[b] = True
                else:
                    out[b].append(best[b])
                    done[b] = len(out[b]) >= limits[b]
            prefixes[b].append(best[b])
        if all(done):
            break
    return out


def beam_search(B, K, limits, next_logits, reorder, alpha=1.0):
    """Beam search of width K for B sentences, rows b K .. b K + K - 1 the beams of sentence b (only
    row b K alive at first). next_logits(prefixes) -> logits (B K,V), as greedy_search's; after each
    step reorder(from_row) makes row r's cache the one of row from_row[r]. Hypotheses are ranked by
    log-probability / length^alpha (EOS counted in the length). -> B lists of ids, each sentence's best."""
    import torch
    prefixes = [[BOS] for _ in range(B * K)]
    scores = torch.full((B * K,), float("-inf"))
    scores[::K] = 0.0
    finished, done = [[] for _ in range(B)], [False] * B
    for t in range(max(limits)):
        logp = allowed(torch.log_softmax(next_logits(prefixes), -1))
        V = logp.size(1)
        norm = (t + 1) ** alpha
        top_v, top_i = (scores.unsqueeze(1) + logp).view(B, K * V).topk(2 * K, dim=1)
        top_v, top_i = top_v.tolist(), top_i.tolist()
        from_row, token, new_scores = list(range(B * K)), [EOS] * (B * K), [float("-inf")] * (B * K)
        for b in range(B):
            if done[b]:
                continue
            alive = 0
            for i in range(2 * K):
                total = top_v[b][i]
                if total == float("-inf") or alive == K:
                    break
                row, v = b * K + top_i[b][i] // V, top_i[b][i] % V
                if v == EOS:
                    if i < K:
                        finished[b].append((total / norm, prefixes[row][1:]))
                    continue
                from_row[b * K + alive], token[b * K + alive], new_scores[b * K + alive] = row, v, total
                alive += 1
            if t + 1 >= limits[b]:
                for k in range(alive):
                    r = b * K + k
                    finished[b].append((new_scores[r] / norm, prefixes[from_row[r]][1:] + [token[r]]))
                done[b] = True
            elif len(finished[b]) >= K or alive == 0:
                done[b] = True
            if done[b]:
                new_scores[b * K:(b + 1) * K] = [float("-inf")] * K
        if all(done):
            break
        prefixes = [prefixes[from_row[r]] + [token[r]] for r in range(B * K)]
        scores = torch.tensor(new_scores)
        reorder(from_row)
    return [max(f, key=lambda x: x[0])[1] if f else [] for f in finished]


# ---- workers (run in subprocesses: the environment is set before torch is imported) --------

def median_seconds(f, warmup, runs):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def build_model(torch, m, seed):
    nn, F = torch.nn, torch.nn.functional
    D, H, V = m["d_model"], m["n_heads"], m["vocab"]

    class Seq2Seq(nn.Module):
        """The reference model: post-LN encoder-decoder, shared and tied embeddings."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D, padding_idx=PAD)  # source, target and output projection
            nn.init.normal_(self.embed.weight, std=D ** -0.5)
            with torch.no_grad():
                self.embed.weight[PAD].zero_()
            pos = torch.arange(m["max_len"]).unsqueeze(1)
            freq = torch.exp(torch.arange(0, D, 2) * (-math.log(10000.0) / D))
            pe = torch.zeros(m["max_len"], D)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
            self.register_buffer("pe", pe)
            self.drop = nn.Dropout(m["dropout"])
            enc = nn.TransformerEncoderLayer(D, H, m["d_ff"], m["dropout"], activation="relu", batch_first=True,
                                             norm_first=False)
            dec = nn.TransformerDecoderLayer(D, H, m["d_ff"], m["dropout"], activation="relu", batch_first=True,
                                             norm_first=False)
            self.encoder = nn.TransformerEncoder(enc, m["encoder_layers"], norm=None, enable_nested_tensor=False)
            self.decoder = nn.TransformerDecoder(dec, m["decoder_layers"], norm=None)
            for layer in self.encoder.layers:
                layer.self_attn.dropout = 0.0  # attention_dropout 0, as the config
            for layer in self.decoder.layers:
                layer.self_attn.dropout = 0.0
                layer.multihead_attn.dropout = 0.0

        def embed_tokens(self, ids, start=0):  # ids (B,T) -> (B,T,D)
            T = ids.size(1)
            return self.drop(self.embed(ids) * math.sqrt(D) + self.pe[start:start + T])

        def encode(self, src):  # src (B,S) -> memory (B,S,D), padding mask (B,S) True = pad
            pad = src == PAD
            return self.encoder(self.embed_tokens(src), src_key_padding_mask=pad), pad

        def decode(self, tgt_in, memory, pad):  # -> logits (B,T,V) for every position
            T = tgt_in.size(1)
            causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            h = self.decoder(self.embed_tokens(tgt_in), memory, tgt_mask=causal, memory_key_padding_mask=pad)
            return h @ self.embed.weight.t()

        def forward(self, src, tgt_in):
            memory, pad = self.encode(src)
            return self.decode(tgt_in, memory, pad)

    torch.manual_seed(seed)
    return Seq2Seq()


def load_cblas():
    lib = ctypes.CDLL("libblas.so.3")  # the OpenBLAS torch links (already loaded: the same copy)
    f = lib.cblas_sgemm
    f.restype = None
    i, p, fl = ctypes.c_int, ctypes.c_void_p, ctypes.c_float
    f.argtypes = [i, i, i, i, i, i, fl, p, i, p, i, fl, p, i]
    return f


def worker_train(args):
    import torch
    torch.set_num_threads(args.torch_threads)
    rss_start = rss_now_mib()
    m, t, _ = load_config(args.config)
    B, L = args.batch, args.length
    model = build_model(torch, m, t["seed"])
    model.train()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])
    gen = torch.Generator().manual_seed(t["seed"])
    V = m["vocab"]
    src, tgt_in, tgt_out = (torch.randint(FIRST_WORD, V, (B, L), generator=gen) for _ in range(3))

    def forward_loss():
        logits = model(src, tgt_in)  # (B,T,V)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD,
                                                 label_smoothing=t["label_smoothing"])

    def step():
        if args.bf16:  # autocast: the forward and the loss only; backward, clip and Adam outside
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = forward_loss()
        else:
            loss = forward_loss()
        loss.backward()
        value = loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["clip_norm"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        return value

    times, loss = [], float("nan")
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = step()
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    rss_peak = peak_rss_mib()
    del model, opt
    step_s = statistics.median(times)
    if args.bf16:  # the step only: the sgemm yardsticks are float32's
        print(json.dumps(dict(torch_threads=args.torch_threads,
                              blas_threads=int(os.environ.get("OPENBLAS_NUM_THREADS", "0")), step_s=step_s,
                              step_min_s=min(times), step_max_s=max(times), loss=loss)))
        return

    # sgemm on the largest product, and the BLAS floor (the scratchformer step's sgemm list)
    gemms = training_step_gemms(m, B, L, L)
    largest = max(gemms, key=lambda g: gemm_flops(g) / g[5])
    na = max(g[0] * g[2] for g in gemms)
    nb = max(g[2] * g[1] for g in gemms)
    nc = max(g[0] * g[1] for g in gemms)
    a, b = torch.rand(na, generator=gen) * 2 - 1, torch.rand(nb, generator=gen) * 2 - 1
    c = torch.empty(nc)
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    sgemm = load_cblas()
    row_major, no_trans, trans = 101, 111, 112

    def run(g):
        mm, n, k, ta, tb, _ = g
        sgemm(row_major, trans if ta else no_trans, trans if tb else no_trans, mm, n, k, 1.0, pa,
              max(1, mm if ta else k), pb, max(1, k if tb else n), 0.0, pc, max(1, n))

    def run_all():
        for g in gemms:
            for _ in range(g[5]):
                run(g)

    runs = max(args.steps, MIN_TIMED_RUNS)
    sgemm_s = median_seconds(lambda: run(largest), GEMM_WARMUP_RUNS, runs)
    floor_s = median_seconds(run_all, GEMM_WARMUP_RUNS, runs)
    calls = sum(g[5] for g in gemms)
    tiny = (1, 1, 1, False, False, 1)
    overhead_s = median_seconds(lambda: [run(tiny) for _ in range(1000)], 1, 5) / 1000 * calls

    flops = training_step_flops(m, B, L, L)
    print(json.dumps(dict(
        torch_threads=args.torch_threads, blas_threads=int(os.environ.get("OPENBLAS_NUM_THREADS", "0")),
        params=params, flops=flops, step_s=step_s, step_min_s=min(times), step_max_s=max(times), loss=loss,
        sgemm_shape=gemm_shape_str(largest), sgemm_gflops=gemm_flops(largest) / largest[5] / sgemm_s / 1e9,
        floor_s=floor_s, floor_overhead_s=overhead_s, gemm_calls=calls, rss_start=rss_start, rss_peak=rss_peak,
        torch_version=torch.__version__, blas_core=openblas_core())))


def worker_decode(args):
    import torch
    torch.set_num_threads(args.torch_threads)
    m, t, run_dir = load_config(args.config)
    path = os.path.join(run_dir, "bench-decode-sources.txt")
    if not os.path.exists(path):
        sys.exit(f"bench_pytorch: {path} is missing: run `scratchformer bench --config {args.config}` first "
                 "(it writes the token ids of the sentences it decodes), or pass --decode-sentences 0")
    with open(path) as f:
        sources = [[int(x) for x in line.split()] for line in f if line.strip()]
    sources = sources[:args.decode_sentences]
    model = build_model(torch, m, t["seed"])
    model.eval()
    F = torch.nn.functional
    D, H = m["d_model"], m["n_heads"]
    Dh = D // H

    def heads(x):  # (B,T,D) -> (B,H,T,Dh)
        return x.view(x.size(0), x.size(1), H, Dh).transpose(1, 2)

    def attend(q, k, v, blocked=None):  # q (B,H,Tq,Dh), k v (B,H,Tk,Dh) -> (B,Tq,D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(Dh)
        if blocked is not None:
            scores = scores.masked_fill(blocked, float("-inf"))
        out = torch.softmax(scores, -1) @ v
        return out.transpose(1, 2).reshape(q.size(0), q.size(2), D)

    def qkv(attn, x, which):  # the q, k or v projection of nn.MultiheadAttention's packed weight
        return F.linear(x, attn.in_proj_weight[which * D:(which + 1) * D], attn.in_proj_bias[which * D:(which + 1) * D])

    def decode_step(tokens, position, pad, cache):  # tokens (R,1) -> logits (R,V); appends to the self-attn cache
        x = model.embed_tokens(tokens, position)
        blocked = pad.view(pad.size(0), 1, 1, -1)
        for i, layer in enumerate(model.decoder.layers):  # post-LN: x = norm(x + sublayer(x))
            c = cache[i]
            k, v = heads(qkv(layer.self_attn, x, 1)), heads(qkv(layer.self_attn, x, 2))
            c["k"] = k if c["k"] is None else torch.cat([c["k"], k], 2)
            c["v"] = v if c["v"] is None else torch.cat([c["v"], v], 2)
            a = attend(heads(qkv(layer.self_attn, x, 0)), c["k"], c["v"])
            x = layer.norm1(x + layer.self_attn.out_proj(a))
            a = attend(heads(qkv(layer.multihead_attn, x, 0)), c["mk"], c["mv"], blocked)
            x = layer.norm2(x + layer.multihead_attn.out_proj(a))
            x = layer.norm3(x + layer.linear2(F.relu(layer.linear1(x))))
        return (x @ model.embed.weight.t()).squeeze(1)

    def next_logits(prefixes, memory, pad, cache, use_cache):
        if use_cache:
            last = torch.tensor([[p[-1]] for p in prefixes])
            return decode_step(last, len(prefixes[0]) - 1, pad, cache)
        return model.decode(torch.tensor(prefixes), memory, pad)[:, -1]  # every position projected, as scratchformer

    def new_cache():
        return [dict(k=None, v=None, mk=None, mv=None) for _ in model.decoder.layers]

    def prefill(src, K, use_cache):  # src (B,S) -> memory (B K,S,D), pad (B K,S), cache (cross K/V filled)
        memory, pad = model.encode(src)
        if K > 1:  # beam search: each source's rows repeated for its K hypotheses
            memory, pad = memory.repeat_interleave(K, 0), pad.repeat_interleave(K, 0)
        cache = new_cache()
        if use_cache:  # cross-attention keys and values: once, from the encoder output, (B K,H,S,Dh) per layer
            for layer, c in zip(model.decoder.layers, cache):
                attn = layer.multihead_attn
                c["mk"], c["mv"] = heads(qkv(attn, memory, 1)), heads(qkv(attn, memory, 2))
        return memory, pad, cache

    def greedy(src, use_cache, clock):  # clock: prefill and decode seconds, added to
        limits = [limit_of(int(n), m["max_len"]) for n in (src != PAD).sum(1)]
        t0 = time.perf_counter()
        memory, pad, cache = prefill(src, 1, use_cache)
        t1 = time.perf_counter()
        out = greedy_search(src.size(0), limits, lambda prefixes: next_logits(prefixes, memory, pad, cache, use_cache))
        clock["prefill"] += t1 - t0
        clock["decode"] += time.perf_counter() - t1
        return out

    def beam_decode(src, K, use_cache, clock):  # clock: prefill and decode seconds, added to
        limits = [limit_of(int(n), m["max_len"]) for n in (src != PAD).sum(1)]
        t0 = time.perf_counter()
        memory, pad, cache = prefill(src, K, use_cache)
        t1 = time.perf_counter()

        def reorder(from_row):  # the self-attention cache follows its hypotheses
            if use_cache:
                index = torch.tensor(from_row)
                for c in cache:
                    c["k"], c["v"] = c["k"].index_select(0, index), c["v"].index_select(0, index)

        out = beam_search(src.size(0), K, limits, lambda prefixes: next_logits(prefixes, memory, pad, cache, use_cache),
                          reorder)
        clock["prefill"] += t1 - t0
        clock["decode"] += time.perf_counter() - t1
        return out

    def time_decoding(beam_size, use_cache):
        seconds, tokens, outputs, clock = 0.0, 0, {}, dict(prefill=0.0, decode=0.0)
        for index, src in padded_batches(torch, sources):
            t0 = time.perf_counter()
            with torch.no_grad():
                out = greedy(src, use_cache, clock) if beam_size == 1 else beam_decode(src, beam_size, use_cache, clock)
            seconds += time.perf_counter() - t0
            tokens += sum(len(o) for o in out)
            outputs.update(zip(index, map(tuple, out)))
        return dict(seconds=seconds, prefill_seconds=clock["prefill"], decode_seconds=clock["decode"],
                    sentences=len(sources), tokens=tokens), outputs

    if args.probe:  # choosing the thread setting: greedy with the cache on the first batch
        sources = sources[:DECODE_BATCH]
        print(json.dumps(dict(seconds=time_decoding(1, True)[0]["seconds"])))
        return

    # the cached step written here against nn.TransformerDecoder's uncached forward, on a random prefix
    gen = torch.Generator().manual_seed(t["seed"])
    with torch.no_grad():
        memory, pad, cache = prefill(torch.tensor([sources[0]]), 1, True)
        prefix = [BOS] + torch.randint(FIRST_WORD, m["vocab"], (6,), generator=gen).tolist()
        full = model.decode(torch.tensor([prefix]), memory, pad)[0]  # (T,V)
        cache_diff = max(float((decode_step(torch.tensor([[tok]]), i, pad, cache)[0] - full[i]).abs().max())
                         for i, tok in enumerate(prefix))

    result = {"cache_max_abs_diff": cache_diff}
    for name, beam, use_cache in [("greedy_cache", 1, True), ("beam4_cache", DECODE_BEAM, True),
                                  ("greedy_nocache", 1, False), ("beam4_nocache", DECODE_BEAM, False)]:
        result[name], outputs = time_decoding(beam, use_cache)
        result[name + "_outputs"] = outputs
    # the cached step written here must decode what the uncached nn.TransformerDecoder does
    agree = {kind: sum(result[kind + "_cache_outputs"][i] == result[kind + "_nocache_outputs"][i]
                       for i in range(len(sources))) for kind in ("greedy", "beam4")}
    for key in [k for k in result if k.endswith("_outputs")]:
        del result[key]
    result["cache_agrees"] = agree
    result["sentences"] = len(sources)
    print(json.dumps(result))


# ---- the parent: settings, the best one, the report -----------------------------------------

def run_worker(args, kind, torch_threads, blas_threads, probe=False, bf16=False, script=__file__):
    """Runs a worker of `script` (this file, or bench_pytorch_rnn.py, which takes the same options) in a
    fresh process -> the JSON of its last stdout line."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas_threads))
    cmd = [sys.executable, os.path.abspath(script), "--config", args.config, "--worker", kind,
           "--torch-threads", str(torch_threads), "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--batch", str(args.batch), "--length", str(args.length), "--decode-sentences", str(args.decode_sentences)]
    cmd += ["--probe"] if probe else []
    cmd += ["--bf16"] if bf16 else []
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_pytorch: the {'bf16 ' if bf16 else ''}{kind} worker ({torch_threads} torch / "
                 f"{blas_threads} OpenBLAS threads) failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def machine_lines(settings, best, load_start, load_end):
    """The table's machine and BLAS lines (bench_pytorch_rnn.py's too)."""
    tried = ", ".join(f"{r['torch_threads']}x{r['blas_threads']}" for r in settings)
    chosen = openblas_core()
    return [f"machine   {cpu_model()}, best of torch threads x OpenBLAS threads {tried}: "
            f"{best['torch_threads']}x{best['blas_threads']}; load average {fixed(load_start, 2)} at the start, "
            f"{fixed(load_end, 2)} at the end",
            f"BLAS      OpenBLAS {best['blas_core']}" +
            (f" (OPENBLAS_CORETYPE set: OpenBLAS chose its generic {chosen} for this CPU)"
             if best['blas_core'] != chosen else "")]


def table_row(out, label, value):
    out.append(f"  {label:<44}{value}")


def step_rows(out, args, settings, best, step_s, tokens_per_s):
    """The table's rows of the training step: each thread setting, the best one's median, tokens/s."""
    for r in settings:
        table_row(out, f"step, torch {r['torch_threads']} / OpenBLAS {r['blas_threads']} threads",
                  f"{r['step_s'] * 1e3:.1f} ms")
    table_row(out, f"training step (median of {args.steps} after {args.warmup})",
              f"{step_s * 1e3:.1f} ms  (min {best['step_min_s'] * 1e3:.1f}, max {best['step_max_s'] * 1e3:.1f}; "
              f"loss {best['loss']:.3f})")
    table_row(out, "target tokens/s", f"{tokens_per_s:.0f}")


def make_parser(description, workers):
    """The command line (bench_pytorch_rnn.py's too); workers: the hidden --worker's choices."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--config", required=True, help="the benchmark config, e.g. configs/bench.toml")
    p.add_argument("--steps", type=int, default=20, help="timed training steps, the median is reported (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--decode-sentences", type=int, default=64,
                   help="test sentences decoded per setting, 0 = no decoding (default 64)")
    p.add_argument("--json", action="store_true", help="print only the JSON line")
    p.add_argument("--batch", type=int, default=64, help=argparse.SUPPRESS)  # the reference: keep 64 x 24
    p.add_argument("--length", type=int, default=24, help=argparse.SUPPRESS)
    p.add_argument("--worker", choices=workers, help=argparse.SUPPRESS)
    p.add_argument("--torch-threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--bf16", action="store_true", help=argparse.SUPPRESS)
    return p


def main():
    args = make_parser(__doc__.split("\n")[0], ["train", "decode"]).parse_args()
    if args.steps < 1 or args.warmup < 0 or args.decode_sentences < 0:
        sys.exit("bench_pytorch: --steps must be >= 1, --warmup and --decode-sentences >= 0")
    if args.worker == "train":
        return worker_train(args)
    if args.worker == "decode":
        return worker_decode(args)
    use_native_blas()
    if config_arch(args.config) == "rnn":  # the recurrent model: its own module, tools/bench_pytorch_rnn.py
        import bench_pytorch_rnn
        return bench_pytorch_rnn.run(args)

    m, t, run_dir = load_config(args.config)
    load_start = os.getloadavg()[0]
    settings = []
    for torch_threads, blas_threads in SETTINGS:
        r = run_worker(args, "train", torch_threads, blas_threads)
        settings.append(r)
        if not args.json:
            print(f"  torch {torch_threads} / OpenBLAS {blas_threads} threads: step {r['step_s'] * 1e3:.1f} ms",
                  file=sys.stderr, flush=True)
    best = min(settings, key=lambda r: r["step_s"])
    unit, bf16_settings = bf16_unit(cpu_flags()), []
    if unit:
        for torch_threads, blas_threads in BF16_SETTINGS:
            r = run_worker(args, "train", torch_threads, blas_threads, bf16=True)
            bf16_settings.append(r)
            if not args.json:
                print(f"  bf16 autocast, torch {torch_threads} / OpenBLAS {blas_threads} threads: "
                      f"step {r['step_s'] * 1e3:.1f} ms", file=sys.stderr, flush=True)
    else:
        print("bench_pytorch: bf16 skipped: the CPU has no AVX512-BF16 or AMX-BF16 (neither avx512_bf16 nor "
              "amx_bf16 in /proc/cpuinfo flags); the bf16 fields are null", file=sys.stderr, flush=True)
    bf16 = min(bf16_settings, key=lambda r: r["step_s"]) if bf16_settings else None
    dec, dec_setting = None, None
    if args.decode_sentences > 0:
        # decoding has its own best setting (small products: extra threads can cost more than they
        # give, badly so on a loaded machine): probe each with greedy on one batch, decode with the fastest
        probes = [(run_worker(args, "decode", tt, bt, probe=True)["seconds"], tt, bt) for tt, bt in SETTINGS]
        _, *dec_setting = min(probes)
        dec = run_worker(args, "decode", *dec_setting)
        if not args.json:
            print("  decoding probe (greedy, one batch): " +
                  ", ".join(f"{tt}x{bt} {s:.2f} s" for s, tt, bt in probes), file=sys.stderr, flush=True)
    load_end = os.getloadavg()[0]

    f = best["flops"]
    step_s = best["step_s"]
    gflops = f["total"] / step_s / 1e9
    tokens_per_s = args.batch * args.length / step_s

    def rate(name):
        return rounded(dec[name]["sentences"] / dec[name]["seconds"], 2) if dec else None

    def phase_ms(name, phase):  # phase: prefill or decode, summed over the batches
        return rounded(dec[name][phase + "_seconds"] * 1e3, 2) if dec else None

    def bf16_ms(key):
        return rounded(bf16[key] * 1e3, 2) if bf16 else None

    j = {
        "tool": "pytorch", "config": args.config, "cpu": cpu_model(), "blas_core": best["blas_core"],
        "threads": best["torch_threads"],
        "load_avg_start": rounded(load_start, 2), "load_avg_end": rounded(load_end, 2),
        "batch": args.batch, "src_len": args.length, "tgt_len": args.length, "vocab": m["vocab"],
        "params": best["params"], "flops_forward": float(f["forward"]), "flops_step": float(f["total"]),
        "warmup": args.warmup, "steps": args.steps, "step_ms": rounded(step_s * 1e3, 2),
        "step_ms_min": rounded(best["step_min_s"] * 1e3, 2), "step_ms_max": rounded(best["step_max_s"] * 1e3, 2),
        "loss": rounded(best["loss"], 4), "tokens_per_s": rounded(tokens_per_s, 1), "gflops": rounded(gflops, 2),
        "sgemm_shape": best["sgemm_shape"], "sgemm_gflops": rounded(best["sgemm_gflops"], 2),
        "mfu": rounded(gflops / best["sgemm_gflops"], 4), "gemm_calls": best["gemm_calls"],
        "floor_ms": rounded(best["floor_s"] * 1e3, 2), "step_over_floor": rounded(step_s / best["floor_s"], 3),
        "rss_start_mib": rounded(best["rss_start"], 1), "rss_peak_mib": rounded(best["rss_peak"], 1),
        "decode_model": "random" if dec else "none", "decode_sentences": dec["sentences"] if dec else 0,
        "greedy_cache_sent_per_s": rate("greedy_cache"), "greedy_nocache_sent_per_s": rate("greedy_nocache"),
        "beam4_cache_sent_per_s": rate("beam4_cache"), "beam4_nocache_sent_per_s": rate("beam4_nocache"),
        "greedy_tokens": dec["greedy_cache"]["tokens"] if dec else None,
        "beam4_tokens": dec["beam4_cache"]["tokens"] if dec else None,
        "bf16_unit": unit if bf16 else None, "bf16_step_ms": bf16_ms("step_s"),
        "bf16_step_ms_min": bf16_ms("step_min_s"), "bf16_step_ms_max": bf16_ms("step_max_s"),
        "bf16_loss": rounded(bf16["loss"], 4) if bf16 else None,
        "bf16_tokens_per_s": rounded(args.batch * args.length / bf16["step_s"], 1) if bf16 else None,
        "greedy_prefill_ms": phase_ms("greedy_cache", "prefill"),
        "greedy_decode_ms": phase_ms("greedy_cache", "decode"),
        "beam4_prefill_ms": phase_ms("beam4_cache", "prefill"), "beam4_decode_ms": phase_ms("beam4_cache", "decode"),
        "torch_threads": best["torch_threads"], "blas_threads": best["blas_threads"],
        "decode_torch_threads": dec_setting[0] if dec else None, "decode_blas_threads": dec_setting[1] if dec else None,
        "decode_cache_max_abs_diff": dec["cache_max_abs_diff"] if dec else None,
        "bf16_torch_threads": bf16["torch_threads"] if bf16 else None,
        "bf16_settings": [{"torch_threads": r["torch_threads"], "blas_threads": r["blas_threads"],
                           "step_ms": rounded(r["step_s"] * 1e3, 2)} for r in bf16_settings] if bf16 else None,
        "settings": [{"torch_threads": r["torch_threads"], "blas_threads": r["blas_threads"],
                      "step_ms": rounded(r["step_s"] * 1e3, 2)} for r in settings],
    }

    if not args.json:
        out = [f"bench_pytorch: {args.config} (torch {best['torch_version']})",
               *machine_lines(settings, best, load_start, load_end),
               f"model     D {m['d_model']}, H {m['n_heads']}, F {m['d_ff']}, layers {m['encoder_layers']}+"
               f"{m['decoder_layers']}, V {m['vocab']}, relu, post-layernorm, dropout {m['dropout']}, shared, tied "
               f"embeddings; {best['params']} parameters",
               f"batch     {args.batch} pairs x {args.length} source + {args.length} target tokens (random ids, "
               f"no padding); adam, label smoothing {t['label_smoothing']}",
               f"FLOPs     forward {f['forward'] / 1e9:.3f} G (projections {f['projections'] / 1e9:.3f}, attention "
               f"{f['attention'] / 1e9:.3f}, output {f['output'] / 1e9:.3f}), backward 2x, step "
               f"{f['total'] / 1e9:.3f} GFLOP (matrix products only)", ""]

        def row(label, value):
            table_row(out, label, value)

        step_rows(out, args, settings, best, step_s, tokens_per_s)
        row("achieved", f"{gflops:.2f} GFLOP/s")
        row(f"cblas_sgemm {best['sgemm_shape']}", f"{best['sgemm_gflops']:.2f} GFLOP/s")
        row("model FLOPs utilisation", f"{100 * gflops / best['sgemm_gflops']:.1f} %")
        row(f"BLAS floor ({best['gemm_calls']} sgemm calls)",
            f"{best['floor_s'] * 1e3:.1f} ms  (of which ctypes ~{best['floor_overhead_s'] * 1e3:.1f} ms)")
        row("step / floor", f"{step_s / best['floor_s']:.2f}")
        row("peak RSS (ru_maxrss)", f"{best['rss_peak']:.1f} MiB  ({best['rss_start']:.1f} MiB after import torch)")
        if bf16:
            for r in bf16_settings:
                row(f"bf16 step, torch {r['torch_threads']} / OpenBLAS {r['blas_threads']} threads",
                    f"{r['step_s'] * 1e3:.1f} ms")
            row(f"bf16 autocast step (median of {args.steps} after {args.warmup})",
                f"{bf16['step_s'] * 1e3:.1f} ms  (min {bf16['step_min_s'] * 1e3:.1f}, max "
                f"{bf16['step_max_s'] * 1e3:.1f}; loss {bf16['loss']:.3f}; {unit}, oneDNN)")
            row("bf16 target tokens/s", f"{args.batch * args.length / bf16['step_s']:.0f}")
            row("bf16 speed-up over the float32 step", f"{step_s / bf16['step_s']:.2f}x")
        else:
            row("bf16 autocast step", "skipped: no avx512_bf16 or amx_bf16 in /proc/cpuinfo flags")
        if dec:
            out += ["", f"decoding {dec['sentences']} sentences of {run_dir}/bench-decode-sources.txt (random model), "
                        f"batches of {DECODE_BATCH}, torch {dec_setting[0]} / OpenBLAS {dec_setting[1]} threads "
                        f"(the fastest on one greedy batch)",
                    f"  KV cache check: logits within {dec['cache_max_abs_diff']:.1e} of the uncached decoder; "
                    f"cached = uncached output for {dec['cache_agrees']['greedy']} (greedy) and "
                    f"{dec['cache_agrees']['beam4']} (beam) sentences",
                    f"  {'':<24}{'sent/s':>10}{'tokens/s':>12}{'tokens':>10}{'prefill ms':>12}{'decode ms':>12}"]
            for label, name, split in [("greedy, KV cache", "greedy_cache", True),
                                       ("greedy, no cache", "greedy_nocache", False),
                                       ("beam 4, KV cache", "beam4_cache", True),
                                       ("beam 4, no cache", "beam4_nocache", False)]:  # uncached: not split
                d = dec[name]
                prefill_ms = fixed(d["prefill_seconds"] * 1e3, 1) if split else "-"
                decode_ms = fixed(d["decode_seconds"] * 1e3, 1) if split else "-"
                out.append(f"  {label:<24}{d['sentences'] / d['seconds']:>10.2f}{d['tokens'] / d['seconds']:>12.1f}"
                           f"{d['tokens']:>10}{prefill_ms:>12}{decode_ms:>12}")
        print("\n".join(out) + "\n")
    print(json.dumps(j))


if __name__ == "__main__":
    main()
