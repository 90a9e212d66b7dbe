#!/usr/bin/python3
"""Scratchformer checkpoints as an interchange format with PyTorch, end to end:

    /usr/bin/python3 tests/torch/test_torch_interchange.py BUILD_DIR      (e.g. build/release)
    /usr/bin/python3 tests/torch/test_torch_interchange.py --python-only  (only (e) and (f), no binary)

First checks, in PyTorch alone (small random models, float64), the [model] keys that change attention:

    (e) window     attention_window = 3: a decoder-only model (rope, grouped-query attention) and an
                   encoder-decoder (alibi, a padded source) give the logits of the same weights with
                   attention_window = 0 and the window |p - j| < 3 added by hand to the self-attention
                   masks (the encoder's, the decoder's causal one; cross-attention not windowed); the
                   window changes the logits; decoding step by step with the KV cache gives the
                   teacher-forced logits
    (f) rope       rope_scaling = "interpolation", rope_factor 2: the rotation at position 2p is the
                   unscaled one at p; interpolation and ntk against the formula written out pair by
                   pair; the config keys: defaults for a config without them, and one-line errors
                   naming the key for a bad value

Then trains two small real models with BUILD_DIR/scratchformer on a slice of Multi30k (an encoder-decoder
and a decoder-only model with grouped-query attention, one thread each), then checks
tools/torch_model.py against the C++ program on each:

    (a) nll        the teacher-forced NLL per target token of the validation pairs equals `eval`'s
                   (relative NLL_REL_TOL), over the same number of pairs and target tokens
    (b) translate  greedy translations identical, line for line, to `translate --beam 1` (the input
                   adds an empty line, a line that is not UTF-8 and one longer than the model takes)
    (c) round trip to-torch, then from-torch writes a checkpoint whose weights equal the original's bit
                   for bit, which `scratchformer translate` loads, and which translates as
                   torch_model.py does on the .pt; then weights changed in PyTorch (2% noise)
                   written back: scratchformer translates them as PyTorch does
    (d) corruption a copy with one flipped data byte is refused by torch_model.py's reader (exit 2,
                   "checksum mismatch")

Prints one line per check and then "N passed, M failed"; exits 0 when all pass, 1 otherwise, and 77
(skipped, one line saying why) when torch, sentencepiece or the binary are missing (when only the
binary, sentencepiece or the corpus is missing, (e) and (f) still run first: a failure there exits 1).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TORCH_MODEL = os.path.join(SOURCE_DIR, "tools", "torch_model.py")
MULTI30K = os.path.join(SOURCE_DIR, "data", "corpora", "multi30k")

# `eval` prints the NLL with 6 significant digits (C++ ostream's default), a rounding of up to
# 5e-6 relative for values of 1..10; PyTorch's and Scratchformer's float32 sums differ by ~1e-7.
NLL_REL_TOL = 1e-5
TRAIN_PAIRS, VALID_PAIRS = 2000, 100

# The two models: a config of configs/ and the --set overrides that make it small and quick.
SMALL = ["data.tokenizer_vocab_size=500", "model.d_model=64", "model.d_ff=128", "train.max_steps=200",
         "train.warmup_steps=30", "train.lr=3e-3", "train.valid_every=1000", "data.max_valid_sentences=10",
         "data.batch_tokens=1024", "run.threads=1", "run.attention_snapshots=false"]
# Every program runs one thread: on a machine shared with a build, OpenMP threads spinning for a
# core someone else holds can make translate many times slower.
ONE_THREAD = {"SCRATCHFORMER_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
MODELS = [
    ("encoder-decoder", "quickstart.toml", SMALL + ["model.encoder_layers=2", "model.decoder_layers=2"]),
    ("decoder-only", "decoder-only-de-en.toml", SMALL + ["model.decoder_layers=3", "model.n_kv_heads=2"]),
]


class Checks:
    """Counts and prints the checks: "ok   name: detail" or "FAIL name: detail"."""

    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, name, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok


def run(cmd, stdin_path=None):
    """-> (exit status, stdout text, stderr text) of cmd (a list)."""
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    try:
        p = subprocess.run(cmd, stdin=stdin, capture_output=True, env={**os.environ, **ONE_THREAD})
    finally:
        if stdin_path:
            stdin.close()
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def must(cmd, what):
    """stdout of cmd, or an exception naming `what` with the end of its stderr."""
    status, out, err = run(cmd)
    if status != 0:
        raise RuntimeError(f"{what} failed (exit {status}): {err.strip()[-500:]}")
    return out


def missing_module(module):
    """One line naming a python module this interpreter lacks, or None."""
    status, _, _ = run([sys.executable, "-c", f"import {module}"])
    if status != 0:
        return f"python module {module} is not installed for {sys.executable} (Debian: python3-{module})"
    return None


def missing_requirement(build_dir):
    """One line naming what this test needs and does not have, or None."""
    for module in ("torch", "sentencepiece"):
        if missing_module(module):
            return missing_module(module)
    binary = os.path.join(build_dir, "scratchformer")
    if not os.access(binary, os.X_OK):
        return f"no scratchformer binary at {binary} (build it first)"
    if not os.path.isdir(MULTI30K):
        return f"no Multi30k corpus at {MULTI30K}"
    return None


def write_first_lines(src, dst, n):
    with open(src, "rb") as f, open(dst, "wb") as out:
        for _ in range(n):
            out.write(f.readline())


def make_data(tmp):
    """Training and validation slices of Multi30k, and translate's input: the validation sources
    plus an empty line, a line that is not UTF-8 and a line of about 400 tokens (cut to the model's
    limit by both programs)."""
    for split, n in (("train", TRAIN_PAIRS), ("valid", VALID_PAIRS)):
        for lang in ("de", "en"):
            write_first_lines(os.path.join(MULTI30K, f"{split}.{lang}"), os.path.join(tmp, f"{split}.{lang}"), n)
    with open(os.path.join(tmp, "valid.de"), "rb") as f:
        valid = f.read()
    long_line = b" ".join(valid.splitlines()[:30])
    with open(os.path.join(tmp, "input.de"), "wb") as f:
        f.write(valid + b"\n" + b"Ein Hund \xff l\xc3\xa4uft.\n" + long_line + b"\n")


def train(binary, tmp, name, config, overrides):
    """Trains one model into tmp/name -> the path of its checkpoint-best."""
    run_dir = os.path.join(tmp, name)
    sets = [f"run.dir={run_dir}", f"data.train_src={tmp}/train.de", f"data.train_tgt={tmp}/train.en",
            f"data.valid_src={tmp}/valid.de", f"data.valid_tgt={tmp}/valid.en", 'data.test_src=""',
            'data.test_tgt=""'] + overrides
    cmd = [binary, "train", "--config", os.path.join(SOURCE_DIR, "configs", config)]
    for s in sets:
        cmd += ["--set", s]
    must(cmd, f"training the {name} model")
    return os.path.join(run_dir, "checkpoint-best.safetensors")


def torch_model(*args):
    return [sys.executable, TORCH_MODEL, *args]


def check_nll(checks, binary, tmp, name, checkpoint):
    """(a) NLL per target token: torch_model.py nll against scratchformer eval, same pairs and tokens."""
    src, ref = os.path.join(tmp, "valid.de"), os.path.join(tmp, "valid.en")
    ours = json.loads(must(torch_model("nll", "--checkpoint", checkpoint, "--src", src, "--ref", ref),
                           "torch_model.py nll"))
    out = must([binary, "eval", "--checkpoint", checkpoint, "--src", src, "--ref", ref, "--beam", "1"],
               "scratchformer eval")
    nll = re.search(r"\bnll (\S+)", out)
    counts = re.search(r"\((\d+) target tokens, (\d+) pairs\)", out)
    if not nll or not counts:
        return checks.check(False, f"{name} (a) nll", f"cannot read eval's output: {out.strip()[-300:]}")
    theirs, tokens, pairs = float(nll.group(1)), int(counts.group(1)), int(counts.group(2))
    rel = abs(ours["nll_per_token"] - theirs) / abs(theirs)
    digits = len(nll.group(1).replace("-", "").replace(".", "").lstrip("0"))
    same_counts = (ours["tokens"], ours["pairs"]) == (tokens, pairs)
    checks.check(same_counts and rel <= NLL_REL_TOL, f"{name} (a) nll",
                 f"torch {ours['nll_per_token']!r} vs eval {nll.group(1)} ({digits} digits printed): relative "
                 f"difference {rel:.2g} (tolerance {NLL_REL_TOL:g}); {ours['pairs']}/{pairs} pairs, "
                 f"{ours['tokens']}/{tokens} target tokens")


def compare_lines(checks, label, ours, theirs):
    a, b = ours.splitlines(), theirs.splitlines()
    matched = sum(x == y for x, y in zip(a, b))
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    detail = f"{matched}/{len(b)} lines identical" + ("" if len(a) == len(b) else f" ({len(a)} lines vs {len(b)})")
    if first is not None:
        detail += f"; first difference at line {first + 1}: {a[first]!r} vs {b[first]!r}"
    return checks.check(a == b and len(b) > 0, label, detail)


def check_translate(checks, binary, tmp, name, checkpoint):
    """(b) greedy translations identical to scratchformer translate --beam 1. -> the C++ output."""
    inp = os.path.join(tmp, "input.de")
    theirs = must([binary, "translate", "--checkpoint", checkpoint, "--beam", "1", "--input", inp],
                  "scratchformer translate")
    ours = must(torch_model("translate", "--checkpoint", checkpoint, "--input", inp), "torch_model.py translate")
    compare_lines(checks, f"{name} (b) translate", ours, theirs)
    return theirs


def check_round_trip(checks, binary, tmp, name, checkpoint, translations):
    """(c) to-torch, from-torch: the weights survive bit for bit; scratchformer translate loads the
    file written and agrees with torch_model.py on the .pt (and with the original's translations)."""
    sys.path.insert(0, os.path.dirname(TORCH_MODEL))
    import torch  # here, not at the top: without torch the test skips (exit 77) instead of failing
    import torch_model as tm
    out_dir = os.path.join(tmp, name + "-from-torch")
    os.makedirs(out_dir)
    pt, back = os.path.join(tmp, name + ".pt"), os.path.join(out_dir, "model.safetensors")
    run_dir = os.path.dirname(checkpoint)
    must(torch_model("to-torch", "--checkpoint", checkpoint, "--out", pt), "torch_model.py to-torch")
    must(torch_model("from-torch", "--torch", pt, "--out", back, "--tokenizer-from", run_dir),
         "torch_model.py from-torch")
    original, _ = tm.read_safetensors(checkpoint)
    written, meta = tm.read_safetensors(back)
    weights = [k for k in original if not k.startswith("optimizer.")]
    same = weights == list(written) and all(torch.equal(original[k], written[k]) for k in weights)
    checks.check(same and meta.get("scratchformer.origin") == "external", f"{name} (c) round trip weights",
                 f"{len(written)} tensors {'equal bit for bit, in the same order' if same else 'DIFFER'}; metadata "
                 f"{sorted(meta)}")
    inp = os.path.join(tmp, "input.de")
    status, theirs, err = run([binary, "translate", "--checkpoint", back, "--beam", "1", "--input", inp])
    if not checks.check(status == 0, f"{name} (c) scratchformer loads the from-torch checkpoint",
                        "exit 0" if status == 0 else f"exit {status}: {err.strip()[-300:]}"):
        return
    ours = must(torch_model("translate", "--torch", pt, "--tokenizer-dir", run_dir, "--input", inp),
                "torch_model.py translate --torch")
    compare_lines(checks, f"{name} (c) translate from-torch checkpoint vs torch_model.py on the .pt", ours, theirs)
    compare_lines(checks, f"{name} (c) from-torch checkpoint vs the original", theirs, translations)

    # Weights made in PyTorch: every weight moved by noise of 2% of its tensor's mean magnitude, as a
    # fine-tuning step would move them. Scratchformer must translate them as PyTorch does, and the
    # change must show (some line differs from the original model's), or the check proves nothing.
    state = torch.load(pt)
    noise = torch.Generator().manual_seed(0)
    for t in state["state_dict"].values():
        t.add_(torch.randn(t.shape, generator=noise) * 0.02 * t.abs().mean())
    changed_pt, changed = os.path.join(tmp, name + "-changed.pt"), os.path.join(out_dir, "changed.safetensors")
    torch.save(state, changed_pt)
    must(torch_model("from-torch", "--torch", changed_pt, "--out", changed), "torch_model.py from-torch (changed)")
    status, theirs, err = run([binary, "translate", "--checkpoint", changed, "--beam", "1", "--input", inp])
    ours = must(torch_model("translate", "--torch", changed_pt, "--tokenizer-dir", run_dir, "--input", inp),
                "torch_model.py translate --torch (changed)")
    compare_lines(checks, f"{name} (c) weights changed in PyTorch: scratchformer vs torch_model.py", ours, theirs)
    differ = sum(a != b for a, b in zip(theirs.splitlines(), translations.splitlines()))
    checks.check(status == 0 and differ > 0, f"{name} (c) the change shows",
                 f"{differ} of {len(translations.splitlines())} lines differ from the original model's")


def check_corruption(checks, tmp, name, checkpoint):
    """(d) one data byte flipped: torch_model.py refuses the file."""
    flipped = os.path.join(tmp, name + "-flipped.safetensors")
    shutil.copyfile(checkpoint, flipped)
    with open(flipped, "r+b") as f:
        f.seek(-5, os.SEEK_END)  # inside the data section: the last tensor
        byte = f.read(1)[0]
        f.seek(-5, os.SEEK_END)
        f.write(bytes([byte ^ 0x10]))
    status, _, err = run(torch_model("translate", "--checkpoint", flipped), os.path.join(tmp, "valid.de"))
    checks.check(status == 2 and "checksum mismatch" in err, f"{name} (d) flipped data byte refused",
                 f"exit {status}: {err.strip()[-200:]}")


# ---------------------------------------------------------------------------------------------
# (e) and (f): the sliding window and RoPE scaling in PyTorch alone (no binary, no corpus)
# ---------------------------------------------------------------------------------------------

WINDOW = 3
# float64 throughout: the windowed model and the hand-masked one make the same products in the same
# order, so they agree to rounding; the cached decoder differs from teacher forcing by rounding only
WINDOW_TOLERANCE = 1e-12


def import_torch_model():
    """-> (torch, the torch_model module); imported here, so that without torch the test skips."""
    sys.path.insert(0, os.path.dirname(TORCH_MODEL))
    import torch
    import torch_model as tm
    return torch, tm


def hand_window(torch, t_q, t_k, q_start=0):
    """The window written out: bool (Tq,Tk), TRUE = BLOCKED where |q_start + i - j| >= WINDOW."""
    return torch.tensor([[abs(q_start + i - j) >= WINDOW for j in range(t_k)] for i in range(t_q)])


def small_models(torch, tm, window_cfg):
    """The same random weights in a model of window_cfg (a tm.ModelConfig) and in one with
    attention_window 0, both float64 in eval mode -> (windowed, full)."""
    torch.manual_seed(11)
    windowed = tm.make_model(window_cfg)
    full = tm.make_model(tm.ModelConfig(**{**window_cfg.__dict__, "attention_window": 0}))
    full.load_state_dict(windowed.state_dict(), strict=True)
    return windowed.double().eval(), full.double().eval()


def max_diff(a, b):
    return float((a - b).abs().max())


def check_window_decoder_only(checks, torch, tm):
    cfg = tm.ModelConfig(arch="decoder-only", tgt_vocab=17, d_model=16, n_heads=4, n_kv_heads=2, d_ff=32,
                         decoder_layers=2, positional="rope", max_len=16, attention_window=WINDOW)
    cfg.validate()
    windowed, full = small_models(torch, tm, cfg)
    tokens = torch.tensor([[2, 5, 9, 4, 11, 7, 6, 13, 8, 5], [2, 12, 6, 10, 4, 4, 9, 15, 16, 3]])  # (B,T)
    T = tokens.shape[1]
    with torch.no_grad():
        logits = windowed(tokens)                                                          # (B,T,V)
        by_hand = full.run_layers(full.embed_tokens(tokens), tm.causal_mask(T, T) | hand_window(torch, T, T))
        by_hand = by_hand @ full.embed.weight.t()
        unwindowed = full(tokens)
        # the KV cache: a prompt of 4, then one token at a time, each step against the teacher-forced logits
        P = 4
        state = windowed.start_decoding(tokens[:, :P])
        stepped = [windowed.decode_step(tokens[:, t:t + 1], state) for t in range(P - 1, T)]
    diff, changed = max_diff(logits, by_hand), max_diff(logits, unwindowed)
    checks.check(diff <= WINDOW_TOLERANCE and changed > 1e-3, "decoder-only (e) window",
                 f"attention_window {WINDOW} vs window 0 with the window mask added by hand: max |difference| "
                 f"{diff:.3g} (tolerance {WINDOW_TOLERANCE:g}); vs full attention {changed:.3g} (must differ)")
    step_diff = max_diff(torch.stack(stepped, dim=1), logits[:, P - 1:])
    checks.check(step_diff <= WINDOW_TOLERANCE, "decoder-only (e) window, KV cache",
                 f"decode_step at positions {P - 1}..{T - 1} vs teacher forcing: max |difference| {step_diff:.3g}")


def check_window_encoder_decoder(checks, torch, tm):
    cfg = tm.ModelConfig(src_vocab=19, tgt_vocab=19, d_model=16, n_heads=4, d_ff=32, encoder_layers=2,
                         decoder_layers=2, positional="alibi", share_embeddings=True, tie_output=True, max_len=16,
                         attention_window=WINDOW)
    cfg.validate()
    windowed, full = small_models(torch, tm, cfg)
    src = torch.tensor([[5, 8, 4, 12, 9, 7, 14, 6, 11], [13, 4, 10, 6, 18, 5, 0, 0, 0]])   # (B,S), row 1 padded
    tgt_in = torch.tensor([[2, 9, 4, 10, 7, 16, 5, 8], [2, 6, 17, 3, 12, 4, 9, 11]])       # (B,T)
    S, T = src.shape[1], tgt_in.shape[1]
    with torch.no_grad():
        logits = windowed(src, tgt_in)                                                     # (B,T,V)
        padding = tm.padding_mask(src, cfg.pad_id)                                         # (B,1,1,S)
        memory = full.encoder(full.embed(full.src_embed, full.src_pos, src), padding | hand_window(torch, S, S))
        y = full.embed(full.target_table(), full.tgt_pos, tgt_in)
        h = full.decoder(y, memory, tm.causal_mask(T, T) | hand_window(torch, T, T), padding)  # cross: padding only
        by_hand = full.project(h)
        unwindowed = full(src, tgt_in)
        state = windowed.start_decoding(src)
        stepped = [windowed.decode_step(tgt_in[:, t:t + 1], state) for t in range(T)]
    diff, changed = max_diff(logits, by_hand), max_diff(logits, unwindowed)
    checks.check(diff <= WINDOW_TOLERANCE and changed > 1e-3, "encoder-decoder (e) window",
                 f"attention_window {WINDOW} vs window 0 with the window mask added by hand to the encoder's and the "
                 f"decoder's self-attention (not to cross-attention): max |difference| {diff:.3g} (tolerance "
                 f"{WINDOW_TOLERANCE:g}); vs full attention {changed:.3g} (must differ)")
    step_diff = max_diff(torch.stack(stepped, dim=1), logits)
    checks.check(step_diff <= WINDOW_TOLERANCE, "encoder-decoder (e) window, KV cache",
                 f"decode_step at positions 0..{T - 1} vs teacher forcing: max |difference| {step_diff:.3g}")


def rope_by_formula(torch, x, positions, scaling, factor):
    """apply_rope written out pair by pair in float64: x (T,Dh), row t at positions[t]; pair k turns by
    p * position_scale * base^(-2k/Dh), as the [model] keys define it."""
    import math
    Dh = x.shape[-1]
    scale = 1.0 / factor if scaling == "interpolation" else 1.0
    base = 10000.0 * factor ** (Dh / (Dh - 2)) if scaling == "ntk" else 10000.0
    out = torch.empty_like(x)
    for t, p in enumerate(positions):
        for k in range(Dh // 2):
            a = p * scale * base ** (-2.0 * k / Dh)
            x0, x1 = float(x[t, 2 * k]), float(x[t, 2 * k + 1])
            out[t, 2 * k], out[t, 2 * k + 1] = x0 * math.cos(a) - x1 * math.sin(a), x0 * math.sin(a) + x1 * math.cos(a)
    return out


def check_rope_scaling(checks, torch, tm):
    Dh, T = 8, 12
    x = torch.randn(1, 1, T, Dh, dtype=torch.float64, generator=torch.Generator().manual_seed(5))  # (B,H,T,Dh)
    # interpolation, factor 2: position 2p turns as position p did; every row at once from start 0 and
    # from a later start (the KV cache's case)
    doubled = tm.apply_rope(x.repeat_interleave(2, dim=2), 0, "interpolation", 2.0)[:, :, 0::2]  # rows at 0,2,4..
    plain = tm.apply_rope(x, 0)
    late = tm.apply_rope(x[:, :, 5:6], 2 * 5, "interpolation", 2.0)
    same = torch.equal(doubled, plain) and torch.equal(late, plain[:, :, 5:6])
    checks.check(same, "(f) rope interpolation",
                 f"rope_factor 2: positions 2p (p = 0..{T - 1}) turn exactly as unscaled positions p "
                 f"({'equal bit for bit' if same else 'DIFFER by %.3g' % max_diff(doubled, plain)})")
    worst, where = 0.0, ""
    for scaling, factor, start in [("none", 1.0, 0), ("interpolation", 3.0, 7), ("ntk", 4.0, 0), ("ntk", 2.5, 9)]:
        got = tm.apply_rope(x, start, scaling, factor)[0, 0]
        want = rope_by_formula(torch, x[0, 0], range(start, start + T), scaling, factor)
        if max_diff(got, want) >= worst:
            worst, where = max_diff(got, want), f"{scaling} {factor:g} from {start}"
    checks.check(worst <= 1e-12, "(f) rope scaling vs the formula",
                 f"none, interpolation 3, ntk 4 and 2.5 against the pair-by-pair formula: max |difference| {worst:.3g} "
                 f"({where})")
    # ntk keeps the fastest pair and interpolates the slowest: base' = 10000 f^(Dh/(Dh-2)) gives
    # theta_last = 10000^(-(Dh-2)/Dh) / f
    _, theta = tm.rope_frequencies(Dh, "ntk", 4.0)
    _, theta0 = tm.rope_frequencies(Dh)
    off = abs(float(theta[-1] * 4.0 / theta0[-1]) - 1)
    ok = float(theta[0]) == float(theta0[0]) == 1.0 and off < 1e-12
    checks.check(ok, "(f) rope ntk frequencies", f"factor 4: theta_0 {float(theta[0])!r} (unscaled 1), theta_last "
                 f"{float(theta[-1]):.6g} = unscaled {float(theta0[-1]):.6g} / 4 to a relative {off:.2g}")


def check_config_keys(checks, tm):
    """parse_config / model_config_from: the defaults for a config without the new keys, the values
    accepted, and one line naming the key for each bad value."""
    base = '[model]\narch = "decoder-only"\nd_model = 16\nn_heads = 4\nmax_len = 16\n'
    m = tm.parse_config(base, "old")["model"]
    defaults = (m["attention_window"], m["rope_scaling"], m["rope_factor"]) == (0, "none", 1.0)
    cfg = tm.model_config_from(tm.parse_config(base + 'positional = "rope"\nattention_window = 16\n'
                                                'rope_scaling = "ntk"\nrope_factor = 4\n', "new"), 0, 9)
    accepted = (cfg.attention_window, cfg.rope_scaling, cfg.rope_factor) == (16, "ntk", 4.0)
    rnn = tm.model_config_from(tm.parse_config('[model]\narch = "rnn"\nattention_window = 0\nrope_scaling = "none"\n'
                                               'rope_factor = 1.0\n', "rnn"), 9, 9)  # a C++ rnn checkpoint's keys
    checks.check(defaults and accepted and rnn.attention_window == 0, "(f) config keys accepted",
                 f"a config without the keys: attention_window {m['attention_window']}, rope_scaling "
                 f"{m['rope_scaling']!r}, rope_factor {m['rope_factor']}; set: {cfg.attention_window}, "
                 f"{cfg.rope_scaling!r}, {cfg.rope_factor}; an rnn config listing them loads")
    bad = [("attention_window = 17", "attention_window", "max_len 16"), ("attention_window = -1", "attention_window",
            "found -1"), ("attention_window = 2.5", "attention_window", "expected int"),
           ('rope_scaling = "yarn"', "rope_scaling", "'yarn'"), ('rope_scaling = "ntk"\nrope_factor = 2',
            "rope_scaling", "positional 'rope'"), ('positional = "rope"\nrope_scaling = "ntk"\nrope_factor = 0.5',
            "rope_factor", "found 0.5"), ('positional = "rope"\nrope_factor = 2', "rope_factor", "found 2.0"),
           ('positional = "rope"\nrope_scaling = "ntk"\nrope_factor = inf', "rope_factor", "finite")]
    wrong = []
    for lines, key, needle in bad:
        try:
            tm.model_config_from(tm.parse_config(base + lines + "\n", "bad"), 0, 9)
            wrong.append(f"{lines!r} accepted")
        except tm.ToolError as e:
            text = str(e)
            if key not in text or needle not in text or "\n" in text:
                wrong.append(f"{lines!r}: {text}")
    checks.check(not wrong, "(f) config keys refused", f"{len(bad) - len(wrong)}/{len(bad)} bad values refused in "
                 f"one line naming the key" + (f"; {'; '.join(wrong)}" if wrong else ""))


def python_only_checks(checks):
    """(e) and (f): torch only."""
    torch, tm = import_torch_model()
    torch.set_num_threads(1)
    for check in (check_window_decoder_only, check_window_encoder_decoder, check_rope_scaling):
        check(checks, torch, tm)
    check_config_keys(checks, tm)


def main(argv):
    if len(argv) != 1:
        print("usage: test_torch_interchange.py BUILD_DIR (the folder of the scratchformer binary) | --python-only",
              file=sys.stderr)
        return 2
    if missing_module("torch"):
        print(f"skipped: {missing_module('torch')}")
        return 77
    checks = Checks()
    python_only_checks(checks)
    missing = "--python-only given" if argv[0] == "--python-only" else missing_requirement(os.path.abspath(argv[0]))
    if missing:
        print(f"{checks.passed} passed, {checks.failed} failed; the checks with the binary skipped: {missing}")
        return 1 if checks.failed else (0 if argv[0] == "--python-only" else 77)
    binary = os.path.join(os.path.abspath(argv[0]), "scratchformer")
    with tempfile.TemporaryDirectory(prefix="scratchformer-torch-") as tmp:
        make_data(tmp)
        for name, config, overrides in MODELS:
            try:
                checkpoint = train(binary, tmp, name, config, overrides)
                check_nll(checks, binary, tmp, name, checkpoint)
                translations = check_translate(checks, binary, tmp, name, checkpoint)
                check_round_trip(checks, binary, tmp, name, checkpoint, translations)
                check_corruption(checks, tmp, name, checkpoint)
            except RuntimeError as e:  # a command that should have worked did not
                checks.check(False, name, str(e))
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
