#!/usr/bin/python3
"""Scratchformer checkpoints as an interchange format with PyTorch, end to end:

    /usr/bin/python3 tests/torch/test_torch_interchange.py BUILD_DIR      (e.g. build/release)

Trains two small real models with BUILD_DIR/scratchformer on a slice of Multi30k (an encoder-decoder
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
(skipped, one line saying why) when torch, sentencepiece or the binary are missing.
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


def missing_requirement(build_dir):
    """One line naming what this test needs and does not have, or None."""
    for module in ("torch", "sentencepiece"):
        status, _, _ = run([sys.executable, "-c", f"import {module}"])
        if status != 0:
            return f"python module {module} is not installed for {sys.executable} (Debian: python3-{module})"
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


def main(argv):
    if len(argv) != 1:
        print("usage: test_torch_interchange.py BUILD_DIR (the folder of the scratchformer binary)", file=sys.stderr)
        return 2
    build_dir = os.path.abspath(argv[0])
    missing = missing_requirement(build_dir)
    if missing:
        print(f"skipped: {missing}")
        return 77
    binary = os.path.join(build_dir, "scratchformer")
    checks = Checks()
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
