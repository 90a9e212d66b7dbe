#!/usr/bin/python3
"""bench_pytorch_rnn: the PyTorch side of `scratchformer bench` on the recurrent model (model.arch = "rnn",
train/bench/rnn_bench.h). tools/bench_pytorch.py hands an rnn config to run() here:

    /usr/bin/python3 tools/bench_pytorch.py --config configs/bench-rnn.toml [--steps N] [--warmup N]
        [--decode-sentences N] [--json]

Prints a short table and one JSON line with scratchformer's field names (tool, mode, config, cpu, threads,
blas_threads, params, batch, length, step_ms, step_ms_min, step_ms_max, loss, tokens_per_s, rss_peak_mib,
rows, decode_sentences, greedy_sent_per_s, beam4_sent_per_s, greedy_tokens, beam4_tokens, decode_batch,
load_avg_start, load_avg_end, steps, warmup), plus row_steps, row_warmup, decode_torch_threads,
decode_blas_threads, decode_step_max_abs_diff and settings. With --json only the JSON line. Needs
Debian's python3-torch.

The model: tools/torch_model.py's RnnSeq2Seq, built from the config's [model] with V =
data.tokenizer_vocab_size on both sides: torch.nn.LSTM (or GRU, RNN) cells, a bidirectional encoder read
packed, the bridge, the decoder stepped one token at a time (nn.LSTM called on one position) with
Bahdanau's additive attention (or dot, general, none). Dropout model.dropout where nn/rnn_seq2seq.cpp has
it: on the scaled embeddings of both sides and on the decoder's output vector o_t. One change of
schedule, not of math, in BenchRnnSeq2Seq below: o_1 .. o_T are projected to the vocabulary in one
product after the loop, as the C++ does (they do not feed the recurrence), where RnnSeq2Seq's own
run_decoder projects each step's. The embeddings start at N(0, 1/D) as in nn/init.h; the other weights
keep PyTorch's initialisation. Its parameter count is printed and must equal scratchformer's.

One step is the trainer's (train/bench/bench.cpp training_step): forward on (src, tgt_in),
label-smoothed cross-entropy (train.label_smoothing, pad ignored), backward, clip_grad_norm_
(train.clip_norm), Adam (train.lr, beta1, beta2, eps), zero_grad(set_to_none=True). The batch: 64
pairs of random ids in [4, V), source and target length 24, no padding, seeded by train.seed.

Threads as bench_pytorch.py: each of torch threads 1 and 2 x OpenBLAS threads 1 and 2 trains in a fresh
subprocess (OPENBLAS_NUM_THREADS set before torch is imported); the fastest median step is reported.
No bf16 part for the recurrent model (one line on stderr says so). Peak RSS: ru_maxrss in the training
subprocess right after the steps, the torch import included.

The length table (rows): the same model at source = target length T = 8, 16, 32, 64, 128, batch
max(1, 1536 // T), so every row trains on about the 1536 target tokens of the main batch; random ids, no
padding; the median of min(--steps, 3) timed steps after min(--warmup, 1), in one more subprocess with
the reported thread setting. The recurrence runs 2 S + T steps one after another, each a product over
the B rows only, so the step grows with T although the tokens do not. (scratchformer's table sets a
Transformer of the same width beside it; this one times the recurrent model only.)

Decoding (a random model, eval mode): the sentences scratchformer bench wrote to
<run.dir>/bench-decode-sources.txt (missing: exit 2, run scratchformer bench first), batches of 64
sorted by length, greedy and beam 4 with scratchformer's rules (bench_pytorch.py's greedy_search and
beam_search: max length ceil(1.5 S) + 10, pad and BOS never generated, length penalty 1.0). The cache is
what RnnSeq2Seq.start_decoding computes once per batch, as the C++ one does: the encoder's states, the
attention keys W_k enc, and the decoder's state (h, c), which each step replaces instead of growing;
beam search repeats each sentence's rows K times and reorders the state's rows after each step. The
thread setting is decoding's own, as in bench_pytorch.py: greedy on one batch per setting, the fastest
decodes everything. Checked once: the stepped decoder's logits equal the teacher-forced forward's at
every position of a random prefix (decode_step_max_abs_diff). A random model rarely emits EOS early,
so compare the tokens as well as the sentences per second.
"""

import json
import os
import statistics
import sys
import time
import tomllib

import bench_pytorch as bp  # the machine, the thread settings, the workers, the decoding rules

ROW_LENGTHS = [8, 16, 32, 64, 128]  # T of the length table
ROW_TOKENS = 64 * 24  # target tokens per step in every row: the main batch's
ROW_STEPS, ROW_WARMUP = 3, 1  # per row (at most --steps and --warmup): the long rows are slow
CHECK_PREFIX = 6  # random tokens after BOS in the stepped-against-teacher-forced check
# float32: the stepped decoder and the forward make the same products, the output projection one row
# block at a time against all T at once, so they differ by rounding only
DECODE_CHECK_TOLERANCE = 1e-4


# ---- the config --------------------------------------------------------------------------

def load_config(tm, path):
    """The config -> (ModelConfig, dropout, the [train] settings, run.dir); one line and exit on a value
    this script does not build or train."""
    with open(path) as f:
        text = f.read()
    try:
        settings = tm.parse_config(text, path)
        vocab = settings["data"].get("tokenizer_vocab_size", 8000)
        cfg = tm.model_config_from(settings, vocab, vocab)
    except tm.ToolError as e:
        sys.exit(f"bench_pytorch: {e}")
    t = settings.get("train", {})
    if t.get("optimizer", "adam") != "adam" or t.get("weight_decay", 0.0) != 0.0:
        sys.exit(f"bench_pytorch: {path}: train.optimizer is {t.get('optimizer')!r} with weight_decay "
                 f"{t.get('weight_decay')}; this script times Adam without weight decay")
    base = os.path.dirname(os.path.abspath(path))
    return cfg, settings["model"]["dropout"], bp.train_section(t), bp.run_dir_of(base, settings.get("run", {}))


def sources_path(config_path):
    """<run.dir>/bench-decode-sources.txt, without importing torch (the parent process)."""
    with open(config_path, "rb") as f:
        run = tomllib.load(f).get("run", {})
    return os.path.join(bp.run_dir_of(os.path.dirname(os.path.abspath(config_path)), run), "bench-decode-sources.txt")


# ---- the model and the step (workers only: they import torch) -------------------------------

def build_model(torch, tm, cfg, dropout, seed):
    """RnnSeq2Seq of cfg with dropout, its weights drawn from seed."""

    class BenchRnnSeq2Seq(tm.RnnSeq2Seq):
        """RnnSeq2Seq projecting o_1 .. o_T in one product after the loop, as nn/rnn_seq2seq.cpp's
        run_decoder does. Returns no attention weights (the bench trains; it draws no alignment)."""

        def run_decoder(self, tgt_in, hx, enc, keys, blocked):  # tgt_in (B,T) -> logits (B,T,V), None
            outputs = []
            for t in range(tgt_in.shape[1]):  # teacher forcing: y_{t-1} is the gold word
                o, hx, _ = self.decoder_output(tgt_in[:, t], hx, enc, keys, blocked)  # o (B,D)
                outputs.append(o)
            return self.out_proj(self.dropout(torch.stack(outputs, dim=1))), None  # (B,T,D) -> (B,T,V)

    torch.manual_seed(seed)
    model = BenchRnnSeq2Seq(cfg, dropout=dropout)
    with torch.no_grad():  # N(0, 1/D), as nn/init.h: scaled by sqrt(D), the cells read unit-variance inputs
        for embed in (model.src_embed, model.tgt_embed):
            embed.weight.normal_(0.0, cfg.d_model ** -0.5)
            embed.weight[cfg.pad_id].zero_()
    return model


def make_step(torch, model, t):
    """-> step(src, tgt_in, tgt_out): one training step, exactly the trainer's; returns the loss."""
    F = torch.nn.functional
    opt = torch.optim.Adam(model.parameters(), lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])

    def step(src, tgt_in, tgt_out):  # (B,S), (B,T), (B,T)
        logits = model(src, tgt_in)  # (B,T,V)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), ignore_index=bp.PAD,
                               label_smoothing=t["label_smoothing"])
        loss.backward()
        value = loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["clip_norm"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        return value

    return step


def random_batch(torch, gen, vocab, B, L):
    """src, tgt_in, tgt_out (B,L) each: random ids in [4, V), no special ids, no padding."""
    return tuple(torch.randint(bp.FIRST_WORD, vocab, (B, L), generator=gen) for _ in range(3))


def time_steps(step, batch, warmup, steps):
    """warmup untimed steps, then steps timed ones -> (their seconds, the last loss)."""
    times, loss = [], float("nan")
    for i in range(warmup + steps):
        start = time.perf_counter()
        loss = step(*batch)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return times, loss


def start_torch(args):
    """In a worker: torch with the setting's threads, set first; torch_model."""
    import torch
    torch.set_num_threads(args.torch_threads)
    import torch_model as tm
    return torch, tm


def blas_threads():
    return int(os.environ.get("OPENBLAS_NUM_THREADS", "0"))


# ---- workers ------------------------------------------------------------------------------

def worker_train(args):
    torch, tm = start_torch(args)
    cfg, dropout, t, _ = load_config(tm, args.config)
    model = build_model(torch, tm, cfg, dropout, t["seed"])
    model.train()
    step = make_step(torch, model, t)
    batch = random_batch(torch, torch.Generator().manual_seed(t["seed"]), cfg.tgt_vocab, args.batch, args.length)
    times, loss = time_steps(step, batch, args.warmup, args.steps)
    rss_peak = bp.peak_rss_mib()
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps(dict(
        torch_threads=args.torch_threads, blas_threads=blas_threads(), params=params,
        step_s=statistics.median(times), step_min_s=min(times), step_max_s=max(times), loss=loss, rss_peak=rss_peak,
        torch_version=torch.__version__, blas_core=bp.openblas_core(),
        model=dict(rnn_cell=cfg.rnn_cell, rnn_attention=cfg.rnn_attention, d_model=cfg.d_model, vocab=cfg.tgt_vocab,
                   encoder_layers=cfg.encoder_layers, decoder_layers=cfg.decoder_layers, dropout=dropout,
                   label_smoothing=t["label_smoothing"]))))


def worker_rows(args):
    torch, tm = start_torch(args)
    cfg, dropout, t, _ = load_config(tm, args.config)
    model = build_model(torch, tm, cfg, dropout, t["seed"])
    model.train()
    step = make_step(torch, model, t)
    gen = torch.Generator().manual_seed(t["seed"])
    rows = []
    for T in ROW_LENGTHS:
        B = max(1, ROW_TOKENS // T)
        times, _ = time_steps(step, random_batch(torch, gen, cfg.tgt_vocab, B, T), min(args.warmup, ROW_WARMUP),
                              min(args.steps, ROW_STEPS))
        rows.append(dict(T=T, batch=B, step_s=statistics.median(times)))
    print(json.dumps(dict(rows=rows)))


def worker_decode(args):
    torch, tm = start_torch(args)
    cfg, dropout, t, run_dir = load_config(tm, args.config)
    with open(os.path.join(run_dir, "bench-decode-sources.txt")) as f:
        sources = [[int(x) for x in line.split()] for line in f if line.strip()][:args.decode_sentences]
    model = build_model(torch, tm, cfg, dropout, t["seed"])
    model.eval()
    K = bp.DECODE_BEAM

    def limits_of(src):  # src (B,S) -> each row's limit_of
        return [bp.limit_of(int(n), cfg.max_len) for n in (src != bp.PAD).sum(1)]

    def next_logits(prefixes, state):  # each row's newest token -> logits (R,V); the state moves one step on
        return model.decode_step(torch.tensor([[p[-1]] for p in prefixes]), state)

    def rows_of(hx, index):  # the decoder state's rows index: (L,R,D), or (h, c) for an LSTM
        return tuple(x.index_select(1, index) for x in hx) if isinstance(hx, tuple) else hx.index_select(1, index)

    def greedy(src):
        state = model.start_decoding(src)  # the prefill: encoder states, keys, s_0
        return bp.greedy_search(src.size(0), limits_of(src), lambda prefixes: next_logits(prefixes, state))

    def beam(src):
        state = model.start_decoding(src)
        # each sentence's row becomes its K hypotheses' rows, b K .. b K + K - 1 (repeat_rows in the C++)
        index = torch.arange(src.size(0)).repeat_interleave(K)
        state.enc, state.keys = state.enc.index_select(0, index), state.keys.index_select(0, index)
        state.blocked, state.hx = state.blocked.index_select(0, index), rows_of(state.hx, index)

        def reorder(from_row):  # each hypothesis goes on from the state of the one it extends
            state.hx = rows_of(state.hx, torch.tensor(from_row))

        return bp.beam_search(src.size(0), K, limits_of(src), lambda prefixes: next_logits(prefixes, state), reorder)

    def time_decoding(decode):
        seconds, tokens = 0.0, 0
        for _, src in bp.padded_batches(torch, sources):
            start = time.perf_counter()
            with torch.no_grad():
                out = decode(src)
            seconds += time.perf_counter() - start
            tokens += sum(len(o) for o in out)
        return dict(seconds=seconds, sentences=len(sources), tokens=tokens)

    if args.probe:  # choosing the thread setting: greedy on the first batch
        sources = sources[:bp.DECODE_BATCH]
        print(json.dumps(dict(seconds=time_decoding(greedy)["seconds"])))
        return

    # the stepped decoder against the teacher-forced forward on the first batch, at every position of a
    # random prefix (the same one for every row)
    _, src = next(bp.padded_batches(torch, sources))
    gen = torch.Generator().manual_seed(t["seed"])
    prefix = [bp.BOS] + torch.randint(bp.FIRST_WORD, cfg.tgt_vocab, (CHECK_PREFIX,), generator=gen).tolist()
    tgt_in = torch.tensor([prefix] * src.size(0))  # (B,T)
    with torch.no_grad():
        full = model(src, tgt_in)  # (B,T,V)
        state = model.start_decoding(src)
        diff = max(float((model.decode_step(tgt_in[:, i:i + 1], state) - full[:, i]).abs().max())
                   for i in range(len(prefix)))
    assert diff < DECODE_CHECK_TOLERANCE, f"the stepped decoder's logits are {diff:.3g} from the teacher-forced " \
                                          f"forward's, expected < {DECODE_CHECK_TOLERANCE}"

    print(json.dumps(dict(greedy=time_decoding(greedy), beam4=time_decoding(beam), sentences=len(sources),
                          step_max_abs_diff=diff)))


# ---- the parent: settings, the best one, the report -----------------------------------------

def run(args):
    """The benchmark (bench_pytorch.py's parsed args): the workers, then the table and the JSON line."""
    path = sources_path(args.config)
    if args.decode_sentences > 0 and not os.path.exists(path):
        print(f"bench_pytorch: {path} is missing: run `scratchformer bench --config {args.config}` first (it writes "
              "the token ids of the sentences it decodes), or pass --decode-sentences 0", file=sys.stderr)
        sys.exit(2)

    def worker(kind, torch_threads, blas, probe=False):
        return bp.run_worker(args, kind, torch_threads, blas, probe=probe, script=__file__)

    load_start = os.getloadavg()[0]
    settings = []
    for torch_threads, blas in bp.SETTINGS:
        r = worker("train", torch_threads, blas)
        settings.append(r)
        if not args.json:
            print(f"  torch {torch_threads} / OpenBLAS {blas} threads: step {r['step_s'] * 1e3:.1f} ms",
                  file=sys.stderr, flush=True)
    best = min(settings, key=lambda r: r["step_s"])
    print("bench_pytorch: no bf16 part for arch rnn (the bf16 settings time the Transformer only)", file=sys.stderr,
          flush=True)
    rows = worker("rows", best["torch_threads"], best["blas_threads"])["rows"]
    row_steps, row_warmup = min(args.steps, ROW_STEPS), min(args.warmup, ROW_WARMUP)
    dec, dec_setting = None, None
    if args.decode_sentences > 0:  # decoding's own setting, as bench_pytorch.py: greedy on one batch decides
        probes = [(worker("decode", tt, bt, probe=True)["seconds"], tt, bt) for tt, bt in bp.SETTINGS]
        _, *dec_setting = min(probes)
        dec = worker("decode", *dec_setting)
        if not args.json:
            print("  decoding probe (greedy, one batch): " +
                  ", ".join(f"{tt}x{bt} {s:.2f} s" for s, tt, bt in probes), file=sys.stderr, flush=True)
    load_end = os.getloadavg()[0]

    step_s = best["step_s"]
    tokens_per_s = args.batch * args.length / step_s

    def rate(name):
        return bp.rounded(dec[name]["sentences"] / dec[name]["seconds"], 2) if dec else None

    j = {
        "tool": "pytorch", "mode": "rnn", "config": args.config, "cpu": bp.cpu_model(), "blas_core": best["blas_core"],
        "threads": best["torch_threads"], "blas_threads": best["blas_threads"],
        "load_avg_start": bp.rounded(load_start, 2), "load_avg_end": bp.rounded(load_end, 2), "params": best["params"],
        "batch": args.batch, "length": args.length, "step_ms": bp.rounded(step_s * 1e3, 2),
        "step_ms_min": bp.rounded(best["step_min_s"] * 1e3, 2), "step_ms_max": bp.rounded(best["step_max_s"] * 1e3, 2),
        "loss": bp.rounded(best["loss"], 4), "tokens_per_s": bp.rounded(tokens_per_s, 1),
        "rss_peak_mib": bp.rounded(best["rss_peak"], 1),
        "rows": [{"T": r["T"], "batch": r["batch"], "rnn_step_ms": bp.rounded(r["step_s"] * 1e3, 2)} for r in rows],
        "decode_sentences": dec["sentences"] if dec else 0,
        "greedy_sent_per_s": rate("greedy"), "beam4_sent_per_s": rate("beam4"),
        "greedy_tokens": dec["greedy"]["tokens"] if dec else None,
        "beam4_tokens": dec["beam4"]["tokens"] if dec else None,
        "decode_batch": bp.DECODE_BATCH if dec else None,
        "steps": args.steps, "warmup": args.warmup, "row_steps": row_steps, "row_warmup": row_warmup,
        "decode_torch_threads": dec_setting[0] if dec else None, "decode_blas_threads": dec_setting[1] if dec else None,
        "decode_step_max_abs_diff": dec["step_max_abs_diff"] if dec else None,
        "settings": [{"torch_threads": r["torch_threads"], "blas_threads": r["blas_threads"],
                      "step_ms": bp.rounded(r["step_s"] * 1e3, 2)} for r in settings],
    }

    if not args.json:
        m = best["model"]
        out = [f"bench_pytorch: {args.config} (torch {best['torch_version']}, arch rnn)",
               *bp.machine_lines(settings, best, load_start, load_end),
               f"model     RnnSeq2Seq: {m['rnn_cell']}, {m['rnn_attention']} attention, D {m['d_model']}, layers "
               f"{m['encoder_layers']} (bidirectional) + {m['decoder_layers']}, V {m['vocab']}, dropout "
               f"{m['dropout']}; {best['params']} parameters",
               f"batch     {args.batch} pairs x {args.length} source + {args.length} target tokens (random ids, "
               f"no padding); adam, label smoothing {m['label_smoothing']}", ""]

        def row(label, value):
            bp.table_row(out, label, value)

        bp.step_rows(out, args, settings, best, step_s, tokens_per_s)
        row("peak RSS (ru_maxrss)", f"{best['rss_peak']:.1f} MiB")
        out += ["", f"length table: source = target length T, {ROW_TOKENS} target tokens per step, median of "
                    f"{row_steps} after {row_warmup}, torch {best['torch_threads']} / OpenBLAS "
                    f"{best['blas_threads']} threads",
                f"  {'T':>5}{'batch':>8}{'step ms':>12}{'tokens/s':>12}"]
        for r in rows:
            tokens = r["T"] * r["batch"]
            out.append(f"  {r['T']:>5}{r['batch']:>8}{r['step_s'] * 1e3:>12.1f}{tokens / r['step_s']:>12.0f}")
        if dec:
            out += ["", f"decoding {dec['sentences']} sentences of {path} (random model), batches of "
                        f"{bp.DECODE_BATCH}, torch {dec_setting[0]} / OpenBLAS {dec_setting[1]} threads (the fastest "
                        f"on one greedy batch)",
                    f"  stepped decoder: logits within {dec['step_max_abs_diff']:.1e} of the teacher-forced forward",
                    f"  {'':<24}{'sent/s':>10}{'tokens/s':>12}{'tokens':>10}"]
            for label, name in [("greedy, state", "greedy"), ("beam 4, state", "beam4")]:
                d = dec[name]
                out.append(f"  {label:<24}{d['sentences'] / d['seconds']:>10.2f}{d['tokens'] / d['seconds']:>12.1f}"
                           f"{d['tokens']:>10}")
        print("\n".join(out) + "\n")
    print(json.dumps(j))


def main():
    args = bp.make_parser(__doc__.split("\n")[0], ["train", "rows", "decode"]).parse_args()
    if args.worker == "train":
        return worker_train(args)
    if args.worker == "rows":
        return worker_rows(args)
    if args.worker == "decode":
        return worker_decode(args)
    if args.steps < 1 or args.warmup < 0 or args.decode_sentences < 0:
        sys.exit("bench_pytorch: --steps must be >= 1, --warmup and --decode-sentences >= 0")
    return run(args)


if __name__ == "__main__":
    main()
