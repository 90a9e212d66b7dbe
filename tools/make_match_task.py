#!/usr/bin/env python3
"""Writes the "match" sentence-pair classification task, built from the Multi30k German-English corpus.

The question for each line: is this English sentence the translation of this German one? Each line of
data/corpora/match/{train,valid,test}.tsv is `label<TAB>german<TAB>english`, label `match` or `mismatch`.

How it is built, for each split on its own (train, valid and test are never mixed):
  - every aligned pair i of data/corpora/multi30k/X.de / X.en gives one example (German sentence i);
  - half of them (floor(n/2), chosen by the seed) are made `mismatch`: German i is paired with the
    English sentence of another pair j of the same split, drawn at random from the same length bucket
    as English i. The buckets group English sentences by word count, --bucket-width words each
    (width 2: 1-2 words, 3-4, 5-6, ...), so the English side's length does not give the answer.
    j is never i, English j is never English i, and (German i, English j) is never a true pair of the
    split (the corpus has a few repeated German sentences). Only if the bucket has no such j (a very
    short or very long sentence alone in its bucket) does the draw widen to the nearest buckets;
    these cases are counted and printed;
  - the other half keep their own English sentence: `match`;
  - the lines of the split are shuffled.
A pair is skipped if either side contains a TAB or is empty; fields are the corpus lines with leading
and trailing whitespace removed, otherwise unchanged (not tokenized, not lowercased).

Why: a classifier (an encoder plus a pooled output) must compare the meaning of two sentences in two
languages; a length heuristic alone does not solve it. The script prints, and writes to SOURCE.md, the
accuracy of the baseline "predict match iff |de words - en words| <= 2", so a model's accuracy can be
compared with what sentence lengths give. Words are whitespace-separated tokens (Python str.split()).

The output is byte-identical on every run: each split uses its own random.Random(seed), and nothing
depends on hash order or on the clock.

    python3 tools/make_match_task.py          # writes data/corpora/match/{train,valid,test}.tsv and SOURCE.md
"""
import argparse
import hashlib
import os
import random
import sys

SPLITS = ["train", "valid", "test"]
DEFAULT_SEED = 20261130
DEFAULT_BUCKET_WIDTH = 2
BASELINE_MAX_DIFF = 2   # the baseline predicts `match` iff |de words - en words| <= this
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def rel(path):
    """A path as shown to the user: relative to the repository root when it lies inside it."""
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def read_lines(path):
    """The lines of a UTF-8 file, split on LF only (str.splitlines would also split on other characters)."""
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n") if text else []


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def n_words(sentence):
    return len(sentence.split())


def load_split(corpus, split):
    """The usable (german, english) pairs of one split, and how many pairs were skipped and why."""
    de = read_lines(os.path.join(corpus, split + ".de"))
    en = read_lines(os.path.join(corpus, split + ".en"))
    if len(de) != len(en):
        sys.exit(f"{split}: {len(de)} German lines but {len(en)} English lines; the files must be aligned")
    pairs, skipped, stripped = [], {"tab": 0, "empty": 0}, 0
    for line_no, (d, e) in enumerate(zip(de, en), start=1):
        if "\t" in d or "\t" in e:
            skipped["tab"] += 1
            print(f"  {split}: skipped line {line_no} (contains a TAB)")
            continue
        stripped += (d != d.strip()) + (e != e.strip())
        d, e = d.strip(), e.strip()
        if not d or not e:
            skipped["empty"] += 1
            print(f"  {split}: skipped line {line_no} (empty)")
            continue
        pairs.append((d, e))
    return pairs, skipped, stripped, len(de)


def build_split(pairs, seed, width):
    """The shuffled (label, german, english) examples of one split, and how many distractors left their bucket."""
    rng = random.Random(seed)
    n = len(pairs)
    true_pairs = set(pairs)
    bucket_of = [(n_words(e) - 1) // width for _, e in pairs]
    buckets = {}
    for i, b in enumerate(bucket_of):
        buckets.setdefault(b, []).append(i)
    all_buckets = sorted(buckets)

    def ok(i, j):
        return j != i and pairs[j][1] != pairs[i][1] and (pairs[i][0], pairs[j][1]) not in true_pairs

    def distractor(i):
        """Index j whose English sentence is paired with German i; second value True if j is outside i's bucket."""
        members = buckets[bucket_of[i]]
        for _ in range(100):   # rejection sampling: uniform over the valid j of the bucket
            j = rng.choice(members)
            if ok(i, j):
                return j, False
        for dist in range(0, max(all_buckets) - min(all_buckets) + 1):   # rare: few or no valid j in the bucket
            near = [j for b in all_buckets if abs(b - bucket_of[i]) == dist for j in buckets[b] if ok(i, j)]
            if near:
                return rng.choice(near), dist > 0
        sys.exit("no valid distractor at all: the split has fewer than two distinct English sentences")

    mismatched = set(rng.sample(range(n), n // 2))
    examples, widened = [], 0
    for i, (d, e) in enumerate(pairs):
        if i in mismatched:
            j, outside = distractor(i)
            widened += outside
            examples.append(("mismatch", d, pairs[j][1]))
        else:
            examples.append(("match", d, e))
    rng.shuffle(examples)
    return examples, widened


def baseline_accuracy(examples):
    """Accuracy of: predict `match` iff |German words - English words| <= BASELINE_MAX_DIFF."""
    right = sum((abs(n_words(d) - n_words(e)) <= BASELINE_MAX_DIFF) == (label == "match") for label, d, e in examples)
    return right / len(examples)


def section(markdown, title):
    """The body of the `## title` section of a Markdown text, its headings one level deeper."""
    lines = markdown.split("\n")
    try:
        start = lines.index("## " + title) + 1
    except ValueError:
        sys.exit(f"section '## {title}' not found in the Multi30k SOURCE.md; the attribution cannot be copied")
    end = next((k for k in range(start, len(lines)) if lines[k].startswith("## ")), len(lines))
    body = ["#" + line if line.startswith("#") else line for line in lines[start:end]]
    return "\n".join(body).strip("\n")


def source_md(args, command, stats, corpus, out):
    with open(os.path.join(corpus, "SOURCE.md"), encoding="utf-8") as f:
        origin_md = f.read()
    w = args.bucket_width
    md = []
    md.append("# match: is this English sentence the translation of this German one?\n")
    md.append(f"A sentence-pair classification task derived from the Multi30k German–English corpus in "
              f"`{rel(corpus)}/`. Each line of `train.tsv`, `valid.tsv` and `test.tsv` is\n\n"
              f"    label<TAB>german<TAB>english\n\n"
              f"with label `match` (the English sentence is the corpus translation of the German one) or "
              f"`mismatch` (it is the translation of another German sentence of the same split). UTF-8, LF line "
              f"endings, no header line, no TAB inside a field, every file ends with a newline.\n")
    md.append("## How it was built\n")
    md.append(f"Generated by `tools/make_match_task.py` (Python 3 standard library only; seeded, so the files "
              f"are byte-identical on every run). To regenerate, from the repository root:\n\n"
              f"    {command}\n\n"
              f"For each split on its own (train, valid and test are never mixed):\n\n"
              f"1. Line *i* of `X.de` and line *i* of `X.en` form pair *i*. A pair is skipped if either side "
              f"contains a TAB or is empty. Fields are the corpus lines with leading and trailing whitespace "
              f"removed (fields that had some: " + ", ".join(f"{stats[x]['stripped']} in {x}" for x in SPLITS)
              + "); the text is otherwise unchanged: raw, "
              f"not tokenized, not lowercased.\n"
              f"2. `random.Random({args.seed})` (a fresh one per split) picks floor(n/2) of the n pairs to be "
              f"`mismatch`. The other pairs keep their own English sentence: `match`.\n"
              f"3. **Bucket rule.** English sentences are grouped by word count (whitespace-separated tokens, "
              f"Python `str.split()`) into buckets of {w} words: bucket *k* = (words − 1) // {w}, i.e. "
              + ", ".join(f"{k * w + 1}–{k * w + w}" for k in range(3)) + ", … words. "
              f"A `mismatch` German sentence *i* gets the English sentence of a pair *j* drawn uniformly from "
              f"the pairs of the split whose English sentence is in the same bucket as English *i*, with "
              f"*j* ≠ *i*, English *j* ≠ English *i*, and (German *i*, English *j*) not a true pair of the split "
              f"(train has a few repeated German sentences with different translations). So the English side "
              f"has the same length distribution under both labels, and its length does not give the answer. "
              f"A pair *j* may be drawn for several German sentences, so an English sentence can occur more "
              f"than once in a file (once as a `match` and again as a distractor, for example). Only if the "
              f"bucket holds no valid *j* (a sentence alone in its bucket) is *j* drawn from the nearest "
              f"buckets; the table counts these cases (\"outside bucket\").\n"
              f"4. The lines of the split are shuffled with the same generator.\n")
    md.append("## Counts\n")
    md.append("Counted from the lines written. \"skipped\" counts corpus pairs dropped in step 1.\n")
    md.append("| split | corpus pairs | skipped (TAB) | skipped (empty) | lines | match | mismatch | "
              "mismatch fraction | outside bucket |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for split in SPLITS:
        s = stats[split]
        md.append(f"| {split} | {s['corpus']} | {s['skipped']['tab']} | {s['skipped']['empty']} | {s['lines']} | "
                  f"{s['match']} | {s['mismatch']} | {s['mismatch'] / s['lines']:.4f} | {s['widened']} |")
    md.append("")
    md.append("## A length baseline, to compare a model with\n")
    t = stats["train"]
    near_chance = all(abs(stats[x]["baseline"] - 0.5) < 0.05 for x in SPLITS)
    md.append(f"The trivial rule \"predict `match` iff |German words − English words| ≤ {BASELINE_MAX_DIFF}\" "
              f"gets the accuracies below (always predicting one label gets the mismatch fraction or its "
              f"complement, about 0.5). On train it says `match` for {t['baseline_match']:.0%} of the `match` "
              f"lines but also for {1 - t['baseline_mismatch']:.0%} of the `mismatch` lines: "
              + ("by the bucket rule a distractor has about as many words as the true translation, so word "
                 "counts tell little and the rule is close to chance. " if near_chance else
                 "word counts still tell something at this bucket width. ")
              + "A model that compares what the two sentences say should clearly beat it.\n")
    md.append("| split | baseline accuracy | accuracy on `match` lines | accuracy on `mismatch` lines |")
    md.append("| --- | --- | --- | --- |")
    for split in SPLITS:
        s = stats[split]
        md.append(f"| {split} | {s['baseline']:.4f} | {s['baseline_match']:.4f} | {s['baseline_mismatch']:.4f} |")
    md.append("")
    md.append("## Files\n")
    md.append("| file | lines | bytes | sha256 |")
    md.append("| --- | --- | --- | --- |")
    for split in SPLITS:
        path = os.path.join(out, split + ".tsv")
        md.append(f"| {split}.tsv | {stats[split]['lines']} | {os.path.getsize(path)} | {sha256(path)} |")
    md.append("")
    md.append("Inputs (sha256), as listed in the Multi30k SOURCE.md:\n")
    for split in SPLITS:
        for lang in ("de", "en"):
            md.append(f"- `{rel(corpus)}/{split}.{lang}`: {sha256(os.path.join(corpus, split + '.' + lang))}")
    md.append("")
    md.append("## Origin, licence and attribution\n")
    md.append(f"This is derived data: it is Multi30k text, only selected, re-paired and shuffled, and it keeps "
              f"the terms of the original. The sections below are copied from `{rel(corpus)}/SOURCE.md`. "
              f"In short: no explicit licence is given for the caption text; use it for non-commercial research "
              f"and educational purposes only, and cite the Multi30K paper.\n")
    md.append("### Origin (of Multi30k)\n")
    md.append(section(origin_md, "Origin") + "\n")
    md.append("### License / terms as stated by the origin\n")
    md.append(section(origin_md, "License / terms as stated by the origin") + "\n")
    return "\n".join(md)


def main():
    parser = argparse.ArgumentParser(
        description="Build the Multi30k 'is this English sentence the translation of this German one?' task "
                    "(label<TAB>german<TAB>english) and write train/valid/test.tsv and SOURCE.md.")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    parser.add_argument("--bucket-width", type=int, default=DEFAULT_BUCKET_WIDTH,
                        help=f"width, in English words, of the length buckets that distractors are drawn from "
                             f"(default {DEFAULT_BUCKET_WIDTH})")
    parser.add_argument("--corpus", default=os.path.join(ROOT, "data", "corpora", "multi30k"),
                        help="folder holding {train,valid,test}.{de,en} and SOURCE.md (default data/corpora/multi30k)")
    parser.add_argument("--out", default=os.path.join(ROOT, "data", "corpora", "match"),
                        help="output folder (default data/corpora/match)")
    args = parser.parse_args()
    if args.bucket_width < 1:
        parser.error("--bucket-width must be at least 1")

    command = "python3 tools/make_match_task.py"
    if args.seed != DEFAULT_SEED:
        command += f" --seed {args.seed}"
    if args.bucket_width != DEFAULT_BUCKET_WIDTH:
        command += f" --bucket-width {args.bucket_width}"
    if os.path.abspath(args.corpus) != os.path.join(ROOT, "data", "corpora", "multi30k"):
        command += f" --corpus {rel(args.corpus)}"
    if os.path.abspath(args.out) != os.path.join(ROOT, "data", "corpora", "match"):
        command += f" --out {rel(args.out)}"

    os.makedirs(args.out, exist_ok=True)
    stats = {}
    for split in SPLITS:
        pairs, skipped, stripped, corpus_pairs = load_split(args.corpus, split)
        examples, widened = build_split(pairs, args.seed, args.bucket_width)
        path = os.path.join(args.out, split + ".tsv")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for label, d, e in examples:
                f.write(f"{label}\t{d}\t{e}\n")
        match = [x for x in examples if x[0] == "match"]
        mismatch = [x for x in examples if x[0] == "mismatch"]
        s = stats[split] = {
            "corpus": corpus_pairs, "skipped": skipped, "lines": len(examples), "match": len(match),
            "mismatch": len(mismatch), "stripped": stripped, "widened": widened, "baseline": baseline_accuracy(examples),
            "baseline_match": baseline_accuracy(match), "baseline_mismatch": baseline_accuracy(mismatch)}
        n_skipped = skipped["tab"] + skipped["empty"]
        print(f"wrote {rel(path)}: {s['lines']} lines ({s['match']} match, {s['mismatch']} mismatch; "
              f"mismatch fraction {s['mismatch'] / s['lines']:.4f}) from {corpus_pairs} corpus pairs, "
              f"{n_skipped} skipped ({skipped['tab']} with a TAB, {skipped['empty']} empty); "
              f"{widened} distractor(s) from outside their bucket; "
              f"length baseline accuracy {s['baseline']:.4f}")
    path = os.path.join(args.out, "SOURCE.md")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(source_md(args, command, stats, args.corpus, args.out))
    print(f"wrote {rel(path)}")


if __name__ == "__main__":
    main()
