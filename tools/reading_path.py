#!/usr/bin/env python3
"""The reading path: the functions one training step runs, measured in the reference build.

    tools/reading_path.py                       # build build/reading-path, train, print the path
    tools/reading_path.py --skip-build          # measure again with the build that is there
    tools/reading_path.py --steps 3 --json rp.json
    tools/reading_path.py --release             # the same on release flags (build/reading-path-release)
    tools/reading_path.py --skip-build --markdown > docs/read-the-code.md
    tools/reading_path.py --skip-build --markdown --lang zh > docs/read-the-code.zh-CN.md

DESIGN.md promises that in the `reference` build the functions of one training step total at most
2,000 lines, none in autograd/runtime/, and the whole one-step command at most 4,500. This script
measures those figures instead of guessing them. Python 3 standard library, gcc/gcov 12.

1. The build. The `reference` preset (-O0 -g3, one thread, every kernel bound to its plain
   version) configured into its own tree, build/reading-path, with two instruments added through
   CMAKE_CXX_FLAGS: `--coverage` (gcov counts how often each function ran) and
   `-finstrument-functions -finstrument-functions-exclude-file-list=/usr/` (every function of the
   project calls __cyg_profile_func_enter on entry). Only the `scratchformer` target, tests off;
   the project's CMake files are not touched. tools/reading_path_hooks.c is compiled beside it into
   a shared library that replaces glibc's empty __cyg_profile_func_enter through LD_PRELOAD.

2. The runs. `scratchformer train --config CONFIG` three times, each in a fresh temporary run
   directory, each after deleting every *.gcda (fresh counters), with these overrides:
     train.max_steps=K        K = 1 (the whole command), N and N + 1 (--steps N, default 2)
     train.log_every, train.valid_every = 1000000
                              no log line or validation inside the loop (step 1 of a session
                              always logs, so the measured step N + 1 >= 2 is an ordinary step)
     data.test_src="", data.test_tgt=""   no test set at the end
     data.max_valid_sentences=1            the validation after the last step: one sentence
     run.threads=1, run.dir=<temporary>
   The first run trains the tokenizer; the others start with its spm.model copied into their run
   directory, so they do not train SentencePiece again (the same in both, so their difference is
   unchanged).

3. The counts. `gcov --json-format --stdout --demangled-names` on every .gcda gives, per function,
   its mangled and demangled name, start_line, end_line and execution_count. Only the project's
   own sources count (autograd/, nn/, data/, train/; not /usr/include). An inline function of a
   header is compiled into every file that includes it: its counts are summed.

4. The step. The functions whose execution counts grew from the N-step run to the (N+1)-step run.
   The hook library checks that list: it records which functions were entered during the last loop
   iteration (from the loop's first call, is_log_step, up to finish()). The two agree unless the
   validation after the last step ran differently (one more update can change the length of the
   greedy translation): a function that grew but was not entered in the step is dropped, one
   entered in the step whose count did not grow is added, and both are named on stderr.

5. Order and stages. gcov has counts, not order. The hook library numbers every call and records
   the first call of each function in the whole run and in each loop iteration, with the stage it
   came in. Stages are set by markers, functions named in MARKERS below (addresses from `nm`):
   entering one sets the stage until the next one (train_step's start: batch; next_batch: batch;
   the model's forward: forward; step_loss: loss; Tensor::backward: backward; DataParallel::sum
   and clip_grad_norm: optimizer; leaving train_step: loop, the loop's own bookkeeping). The whole
   command's phases are set the same way (load_or_train_tokenizers: tokenizer; its return: corpus;
   build_model: model; its return: setup; the loop: step; validate: validation; save: checkpoint;
   finish: end). A function belongs to the stage of its first call.

6. Lines. A function's length is end_line - start_line + 1 (what a reader scrolls through). A
   template instantiated several times is one entry (same file and start line), and the totals
   count every source line once, so a lambda inside a listed function is not counted twice.

7. --release: the same runs on the release preset's flags (-O3 -march=native -g, in
   build/reading-path-release), with --coverage only: -finstrument-functions would change what is
   inlined. The figure is the functions gcov still sees (a function inlined before the coverage
   pass has no counts of its own), with no hook to check the difference; order and stage come from
   the reference build's last measurement (build/reading-path/reading-path.json) when there is one.

Output: one line per function, `  file:line  name  (L lines)`, under a header per stage, then the
whole command by phase, the targets, and last exactly one line:
    one step: F functions, L lines; whole command: F2 functions, L2 lines
--markdown prints docs/read-the-code.md instead, with one sentence per function from
tools/reading_path_notes.tsv (--lang zh: tools/reading_path_notes.zh-CN.tsv), keyed by the name
as printed. Progress goes to stderr.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("autograd", "nn", "data", "train")
RUNTIME = "autograd/runtime/"
TARGET_STEP_LINES = 2000
TARGET_COMMAND_LINES = 4500

STAGES = ["batch", "forward", "loss", "backward", "optimizer", "loop"]
STAGE_TITLES = {
    "batch": "batch: the next batch of the training split",
    "forward": "forward: the model's logits",
    "loss": "loss: label-smoothed cross-entropy",
    "backward": "backward: the gradients",
    "optimizer": "optimizer: clip and update",
    "loop": "loop: the training loop around the step",
}
PHASES = ["config", "tokenizer", "corpus", "model", "setup", "step", "validation", "checkpoint", "end"]
PHASE_TITLES = {
    "config": "config: command line, config file, run directory",
    "tokenizer": "tokenizer: SentencePiece trained (or loaded)",
    "corpus": "corpus: the train and valid splits encoded, the batcher",
    "model": "model construction: modules, parameters, optimizer",
    "setup": "setup: metrics files, signals",
    "step": "step: the training step",
    "validation": "validation: loss and BLEU on one sentence",
    "checkpoint": "checkpoint: safetensors written",
    "end": "end: the last lines, exit",
}
UNORDERED = "unordered"
STAGE_TITLES[UNORDERED] = PHASE_TITLES[UNORDERED] = (
    "unordered: not seen by the order measurement (with --release: not run by the reference build), by file")

_ANON = r"sf::train::\(anonymous namespace\)::"
_RUN = r"sf::train::\(anonymous namespace\)::TrainingRun"
# (regex on the demangled name, kind, on entry, on exit). Kind T: a loop iteration begins (the
# step the order is recorded for); S: sets the stage; P: sets the phase of the whole command.
MARKERS = [
    (_ANON + r"is_log_step\(", "T", "loop", None),
    (_ANON + r"is_log_step\(", "P", "step", None),
    (_ANON + r"train_step\(", "S", "batch", "loop"),
    (_ANON + r"train_step\(", "P", "step", None),
    (_ANON + r"next_batch\(", "S", "batch", None),
    (r"sf::nn::\w+::forward\(sf::Tensor const&, sf::Tensor const&\) const$", "S", "forward", None),
    (_ANON + r"step_loss\(", "S", "loss", None),
    (r"sf::Tensor::backward\(", "S", "backward", None),
    (r"sf::train::DataParallel::sum\(", "S", "optimizer", None),
    (r"sf::train::clip_grad_norm\(", "S", "optimizer", None),
    (r"sf::train::load_config\(", "P", "config", None),
    (r"sf::train::load_or_train_tokenizers\(", "P", "tokenizer", "corpus"),
    (r"sf::train::load_tokenizers\(", "P", "tokenizer", "corpus"),
    (_ANON + r"build_model\(" + _RUN, "P", "model", "setup"),
    (_ANON + r"finish\(" + _RUN, "P", "end", None),
    (_ANON + r"validate\(" + _RUN, "P", "validation", "end"),
    (_ANON + r"save\(" + _RUN, "P", "checkpoint", None),
]
COVERAGE_FLAGS = "--coverage"
ORDER_FLAGS = "-finstrument-functions -finstrument-functions-exclude-file-list=/usr/"
BIG = 1000000  # log_every, valid_every: never inside the loop


def say(msg):
    print(f"[reading-path] {msg}", file=sys.stderr, flush=True)


def fail(msg):
    print(f"reading_path.py: {msg}", file=sys.stderr)
    sys.exit(2)


def run_logged(cmd, log_path, cwd, env=None):
    """Runs cmd with its output in log_path; on failure says so with the log's last lines."""
    with open(log_path, "w") as log:
        rc = subprocess.call(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        with open(log_path, errors="replace") as log:
            tail = log.readlines()[-25:]
        fail(f"{' '.join(cmd[:3])} ... failed (exit {rc}); the end of {log_path}:\n" + "".join(tail))


# ---- 1. the build ---------------------------------------------------------------------------------

def build(src, build_dir, release, skip_build):
    """Configures and builds `scratchformer` with the instruments; returns the seconds taken."""
    t0 = time.time()
    exe = os.path.join(build_dir, "scratchformer")
    hooks = os.path.join(build_dir, "reading_path_hooks.so")
    if skip_build:
        if not os.path.exists(exe):
            fail(f"--skip-build: no {exe}; run once without --skip-build")
        return 0.0
    os.makedirs(build_dir, exist_ok=True)
    flags = COVERAGE_FLAGS if release else f"{COVERAGE_FLAGS} {ORDER_FLAGS}"
    preset = "release" if release else "reference"
    say(f"configure: cmake --preset {preset} -B {build_dir} (CMAKE_CXX_FLAGS={flags})")
    run_logged(["cmake", "-S", src, "-B", build_dir, "--preset", preset, "-DSCRATCHFORMER_BUILD_TESTS=OFF",
                f"-DCMAKE_CXX_FLAGS={flags}", f"-DCMAKE_EXE_LINKER_FLAGS={COVERAGE_FLAGS}"],
               os.path.join(build_dir, "reading-path-configure.log"), src)
    say("build: cmake --build --target scratchformer -j2 (a few minutes from scratch)")
    run_logged(["cmake", "--build", build_dir, "--target", "scratchformer", "-j2"],
               os.path.join(build_dir, "reading-path-build.log"), src)
    if not release:
        say("build: the hook library (tools/reading_path_hooks.c)")
        run_logged(["cc", "-O2", "-shared", "-fPIC", "-Wall", "-o", hooks,
                    os.path.join(src, "tools", "reading_path_hooks.c")],
                   os.path.join(build_dir, "reading-path-hooks.log"), src)
    say(f"build: done in {time.time() - t0:.0f} s")
    return time.time() - t0


# ---- symbols, markers -----------------------------------------------------------------------------

def read_symbols(exe):
    """{offset: [mangled names]}, {mangled: offset} and {mangled: demangled} of the functions."""
    def nm(*extra):
        out = subprocess.run(["nm", "--defined-only", "--no-sort", *extra, exe], capture_output=True, text=True,
                             check=True).stdout
        return out.splitlines()
    by_offset, offset_of, demangled = {}, {}, {}
    for raw, dem in zip(nm(), nm("-C")):
        parts, dparts = raw.split(" ", 2), dem.split(" ", 2)
        if len(parts) < 3 or parts[1] not in "tTwW":
            continue
        offset = int(parts[0], 16)
        by_offset.setdefault(offset, []).append(parts[2])
        offset_of[parts[2]] = offset
        demangled[parts[2]] = dparts[2] if len(dparts) == 3 else parts[2]
    return by_offset, offset_of, demangled


def marker_spec(offset_of, demangled):
    """RP_MARKERS for the hook library; warns about markers that name no function."""
    entries = []
    for pattern, kind, on_enter, on_exit in MARKERS:
        names = STAGES if kind in "ST" else PHASES
        enter = names.index(on_enter) if on_enter else -1
        leave = names.index(on_exit) if on_exit else -1
        hits = [m for m, d in demangled.items() if re.match(pattern, d)]
        if not hits:
            say(f"warning: marker /{pattern}/ names no function: its {'phase' if kind == 'P' else 'stage'} "
                "starts at the next marker")
        entries += [f"{offset_of[m]:x}:{kind}:{enter}:{leave}" for m in hits]
    if not any(e.split(":")[1] == "T" for e in entries):
        fail("no function marks the training loop (is_log_step in train/trainer.cpp): update MARKERS")
    return ",".join(entries)


# ---- 2. the runs ----------------------------------------------------------------------------------

def run_training(exe, config, steps, run_dir, build_dir, hooks, markers, tokenizer_from, extra_sets):
    """One `scratchformer train` of `steps` steps with fresh counters; returns (trace path, seconds)."""
    for gcda in glob.glob(os.path.join(build_dir, "**", "*.gcda"), recursive=True):
        os.remove(gcda)
    os.makedirs(run_dir)
    if tokenizer_from:
        for f in glob.glob(os.path.join(tokenizer_from, "spm*.model")) + glob.glob(os.path.join(tokenizer_from, "spm*.vocab")):
            shutil.copy(f, run_dir)
    sets = [f"train.max_steps={steps}", f"train.log_every={BIG}", f"train.valid_every={BIG}", 'data.test_src=""',
            'data.test_tgt=""', "data.max_valid_sentences=1", "run.threads=1", f"run.dir={run_dir}"] + extra_sets
    cmd = [exe, "train", "--config", config]
    for s in sets:
        cmd += ["--set", s]
    trace = os.path.join(os.path.dirname(run_dir), f"trace-{steps}.txt")
    env = dict(os.environ, OMP_NUM_THREADS="1", SCRATCHFORMER_NUM_THREADS="1")
    if hooks:
        env.update(LD_PRELOAD=hooks, RP_OUTPUT=trace, RP_MARKERS=markers)
    t0 = time.time()
    run_logged(cmd, os.path.join(os.path.dirname(run_dir), f"train-{steps}.log"), os.path.dirname(run_dir), env)
    return (trace if hooks else None), time.time() - t0


# ---- 3. the counts --------------------------------------------------------------------------------

def read_gcov(build_dir, src):
    """{mangled: {demangled, file, start, end, count}} of the project's functions, counts summed."""
    gcdas = sorted(glob.glob(os.path.join(build_dir, "**", "*.gcda"), recursive=True))
    if not gcdas:
        fail(f"no .gcda files under {build_dir}: was it built with --coverage?")
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["gcov", "--json-format", "--stdout", "--demangled-names", *gcdas], cwd=tmp,
                             capture_output=True, text=True)
    if out.returncode != 0:
        fail("gcov failed: " + out.stderr[-2000:])
    funcs = {}
    for line in out.stdout.splitlines():
        if not line.startswith("{"):
            continue
        for f in json.loads(line)["files"]:
            rel = os.path.relpath(os.path.realpath(os.path.join(build_dir, f["file"])), src)
            if rel.split(os.sep)[0] not in FOLDERS:
                continue
            for fn in f["functions"]:
                entry = funcs.setdefault(fn["name"], {"demangled": fn.get("demangled_name", fn["name"]), "file": rel,
                                                      "start": fn["start_line"], "end": fn["end_line"], "count": 0})
                entry["count"] += fn["execution_count"]
    return funcs


def read_trace(path):
    """First calls: ({offset: (seq, phase)}, {step: {offset: (seq, stage, phase)}})."""
    first, steps = {}, {}
    if not os.path.exists(path):
        fail(f"the hook library wrote no {path}: was {os.path.basename(path)} preloaded (LD_PRELOAD)?")
    with open(path) as f:
        for line in f:
            p = line.split()
            if p[0] == "F":
                first[int(p[2], 16)] = (int(p[1]), PHASES[int(p[3])])
            elif p[0] == "S":
                steps.setdefault(int(p[1]), {})[int(p[3], 16)] = (int(p[2]), STAGES[int(p[4])], PHASES[int(p[5])])
    return first, steps


# ---- names ----------------------------------------------------------------------------------------

_OPERATOR = re.compile(r"operator\s*(\(\)|\[\]|<=>|<<=|>>=|<<|>>|->\*|->|==|!=|<=|>=|&&|\|\||\+\+|--|[-+*/%^&|]=|"
                       r"new\[\]|delete\[\]|[-+*/%^&|~!=<>,]|\s[\w:]+(?:\s*[*&]+)?)")


def short_name(demangled):
    """sf::train::(anonymous namespace)::train_step(TrainingRun&, bool) -> sf::train::train_step:
    no return type, template arguments, parameters or qualifiers; lambdas as {lambda#1}."""
    s = demangled.replace("(anonymous namespace)::", "")
    ops = []

    def keep(m):
        ops.append(m.group(0))
        return f"\x01{len(ops) - 1}\x02"
    s = _OPERATOR.sub(keep, s)
    out, depth = [], 0
    for c in s:  # drop every (...) and <...>, nested or not
        if c in "(<":
            depth += 1
        elif c in ")>":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    s = "".join(out).strip()
    s = re.sub(r"\[abi:\w+\]", "", s)
    s = re.sub(r"(\s*(const|volatile|&&|&))+(?=::|$)", "", s)  # qualifiers of a member function
    s = s.split(" ")[-1]  # a template function's return type comes first
    s = re.sub(r"\x01(\d+)\x02", lambda m: ops[int(m.group(1))], s).strip()
    return re.sub(r"(\{lambda#\d+\})::operator\(\)", r"\1", s)  # a lambda's body: {lambda#1}


# ---- 4-6. the analysis ----------------------------------------------------------------------------

def entries_of(funcs, selected, order):
    """One entry per (file, start line) of the selected mangled names, in first-call order.
    order: {mangled: (seq, group)}; entries without one go last, by file and line."""
    by_place = {}
    for m in selected:
        f = funcs[m]
        key = (f["file"], f["start"])
        e = by_place.setdefault(key, {"file": f["file"], "line": f["start"], "end": f["end"], "names": [],
                                      "seq": None, "group": UNORDERED})
        e["end"] = max(e["end"], f["end"])
        seq, group = order.get(m, (None, UNORDERED))
        e["names"].append((seq if seq is not None else float("inf"), short_name(f["demangled"]), f["demangled"]))
        if seq is not None and (e["seq"] is None or seq < e["seq"]):
            e["seq"], e["group"] = seq, group
    out = []
    for e in by_place.values():
        _, e["name"], e["demangled"] = min(e["names"])  # the instantiation called first
        e["instances"] = len(e["names"])
        e["lines"] = e["end"] - e["line"] + 1
        del e["names"]
        out.append(e)
    out.sort(key=lambda e: (e["seq"] is None, e["seq"] if e["seq"] is not None else 0, e["file"], e["line"]))
    return out


def total_lines(entries, prefix=""):
    """Distinct source lines covered by the entries (of files starting with prefix)."""
    lines = set()
    for e in entries:
        if e["file"].startswith(prefix):
            lines.update((e["file"], n) for n in range(e["line"], e["end"] + 1))
    return len(lines)


def order_from_trace(records, by_offset, funcs, index):
    """{mangled: (seq, group)} from {offset: record}; index picks the group out of the record."""
    order = {}
    for offset, rec in records.items():
        for m in by_offset.get(offset, []):
            if m in funcs:
                order[m] = (rec[0], rec[index])
    return order


def analyse(funcs_by_run, n, traces, symbols, reference_order):
    funcs = {}
    for run in funcs_by_run.values():
        funcs.update(run)
    before, after, whole = funcs_by_run[n], funcs_by_run[n + 1], funcs_by_run[1]
    grew = {m for m in after if after[m]["count"] > before.get(m, {"count": 0})["count"]}
    ran = {m for m in whole if whole[m]["count"] > 0}
    notes = []
    if traces:
        by_offset = symbols[0]
        _, steps = read_trace(traces[n + 1])
        last = steps.get(n, {})
        in_step = {o: r for o, r in last.items() if r[2] == "step"}  # up to finish(): the loop iteration
        step_order = order_from_trace(in_step, by_offset, funcs, 1)
        entered = set(step_order)
        dropped, added = sorted(grew - entered), sorted(entered - grew)
        if dropped:
            notes.append(f"{len(dropped)} function(s) grew from {n} to {n + 1} steps but were not entered in the step "
                         "(the validation after the last step ran differently): left out: "
                         + ", ".join(short_name(funcs[m]["demangled"]) for m in dropped))
        if added:
            notes.append(f"{len(added)} function(s) were entered in the step but their counts did not grow (the "
                         "validation after the last step ran differently): kept: "
                         + ", ".join(short_name(funcs[m]["demangled"]) for m in added))
        step_set = entered
        first, _ = read_trace(traces[1])
        command_order = order_from_trace(first, by_offset, funcs, 1)
    else:
        step_set = grew
        step_order, command_order = reference_order
        step_order = {m: step_order[(funcs[m]["file"], funcs[m]["start"])] for m in funcs
                      if (funcs[m]["file"], funcs[m]["start"]) in step_order}
        command_order = {m: command_order[(funcs[m]["file"], funcs[m]["start"])] for m in funcs
                         if (funcs[m]["file"], funcs[m]["start"]) in command_order}
    step = entries_of(funcs, step_set, step_order)
    command = entries_of(funcs, ran, command_order)
    return step, command, notes


def figures(step, command):
    return {"step_functions": len(step), "step_lines": total_lines(step),
            "step_runtime_lines": total_lines(step, RUNTIME), "step_runtime_functions":
            sum(1 for e in step if e["file"].startswith(RUNTIME)),
            "command_functions": len(command), "command_lines": total_lines(command)}


# ---- output ---------------------------------------------------------------------------------------

def grouped(entries, groups):
    for g in groups + [UNORDERED]:
        members = [e for e in entries if e["group"] == g]
        if members:
            yield g, members


def entry_line(e):
    more = f", {e['instances']} instantiations" if e["instances"] > 1 else ""
    return f"  {e['file']}:{e['line']}  {e['name']}  ({e['lines']} line{'s' if e['lines'] != 1 else ''}{more})"


def target_line(fig):
    def verdict(ok):
        return "met" if ok else "not met"
    return (f"targets: one step at most {TARGET_STEP_LINES:,} lines ({fig['step_lines']:,}: "
            f"{verdict(fig['step_lines'] <= TARGET_STEP_LINES)}), none in {RUNTIME} ({fig['step_runtime_lines']:,} "
            f"lines in {fig['step_runtime_functions']} functions: {verdict(fig['step_runtime_lines'] == 0)}); "
            f"whole command at most {TARGET_COMMAND_LINES:,} lines ({fig['command_lines']:,}: "
            f"{verdict(fig['command_lines'] <= TARGET_COMMAND_LINES)})")


def figure_line(fig):
    return (f"one step: {fig['step_functions']} functions, {fig['step_lines']} lines; "
            f"whole command: {fig['command_functions']} functions, {fig['command_lines']} lines")


def print_text(result):
    fig = result["figures"]
    print(f"Reading path of `scratchformer train --config {result['config']}` in the {result['preset']} build "
          f"({result['build_dir']})")
    print()
    print(f"One training step (step {result['steps'] + 1}: the functions whose counts grew from {result['steps']} "
          f"to {result['steps'] + 1} steps), by stage, in first-call order:")
    for g, members in grouped(result["step"], STAGES):
        print(f"{STAGE_TITLES.get(g, g)}  [{len(members)} functions, {total_lines(members)} lines]")
        for e in members:
            print(entry_line(e))
    print()
    print("The whole one-step command (every function that ran), by phase, in first-call order:")
    for g, members in grouped(result["command"], PHASES):
        print(f"{PHASE_TITLES.get(g, g)}  [{len(members)} functions, {total_lines(members)} lines]")
        for e in members:
            print(entry_line(e))
    print()
    print(f"lines of the step in {RUNTIME}: {fig['step_runtime_lines']} "
          f"({fig['step_runtime_functions']} functions; target 0)")
    print(target_line(fig))
    print(figure_line(fig))


def read_notes(path):
    notes = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip() and not line.startswith("#") and "\t" in line:
                    name, sentence = line.rstrip("\n").split("\t", 1)
                    notes[name.strip()] = sentence.strip()
    return notes


def note_for(notes, e):
    return notes.get(f"{e['name']}@{e['file']}:{e['line']}") or notes.get(f"{e['name']}@{e['file']}") or notes.get(e["name"])


MD = {
    "en": {
        "generated": "<!-- GENERATED by tools/reading_path.py --markdown: edit tools/reading_path_notes.tsv, then "
                     "regenerate (see below). -->",
        "title": "# Read the code: one training step, function by function",
        "banner": "*Generated from the output of `tools/reading_path.py` on {source}; the figures it measured:*",
        "intro": [
            "This is the reading path through Scratchformer: the functions one training step of "
            "`scratchformer train --config {config}` runs in the `{preset}` build, in the order the step first "
            "calls them, grouped by stage. Read them top to bottom with the source beside you, or break on each "
            "in gdb (docs/debugging.md).",
            "",
            "How it was measured: `tools/reading_path.py` builds the `{preset}` preset with gcov coverage and "
            "`-finstrument-functions`, trains {n} and then {n1} steps, and keeps the functions whose execution counts "
            "grew: the functions of one step (step {n1}: an ordinary step, with no log line or validation). A small "
            "hook library records the order of their first calls and the stage each came in. A function's length "
            "is its source lines (last line minus first plus one); a template instantiated several times counts "
            "once. The sentences come from `tools/reading_path_notes.tsv`. Regenerate this page with",
            "",
            "    tools/reading_path.py --markdown > docs/read-the-code.md",
            "",
            "Targets (DESIGN.md): one step at most {t1:,} lines, none in `{runtime}`; the whole one-step command "
            "at most {t2:,}. Measured: {step_lines:,} lines for the step ({runtime_lines:,} of them in "
            "`{runtime}`), {command_lines:,} for the whole command.",
        ],
        "stages": "## One step, by stage",
        "summary": "## The whole one-step command, by phase",
        "summary_intro": "Every function the one-step command runs (config, tokenizer, corpus, model construction, the "
                         "step, a validation sentence, the checkpoint), counted in the phase of its first call: a "
                         "function the step shares with model construction counts there. `tools/reading_path.py` "
                         "without `--markdown` lists them all.",
        "table": "| phase | functions | lines |\n|---|---:|---:|",
        "command_over": "The whole command stays above its {t2:,}-line target, by {over:,} lines, and we leave it "
                        "there: the step, the part a student reads in an afternoon, is within its target, and much of "
                        "the rest is what makes the tool safe to use. {config:,} lines are the command line and the "
                        "config file: every subcommand's options are declared before the command line is parsed "
                        "(that is how `--help` and a misspelt option get their answers), and every config key is "
                        "checked, with a message naming the key, what was expected and what was found. {validation:,} "
                        "are the validation sentence (its greedy translation and BLEU), {checkpoint:,} the checkpoint. "
                        "Reaching {t2:,} would mean dropping those messages or features the course uses.",
        "total": "| **total** | **{f}** | **{l:,}** |",
        "functions_lines": "{f} functions, {l:,} lines",
        "missing": "(no sentence yet: add one to tools/reading_path_notes.tsv)",
        "lines": lambda n: "1 line" if n == 1 else f"{n} lines",
        "entry": "- {where} ({lines}): {sentence}",
        "stage_titles": STAGE_TITLES,
        "phase_titles": PHASE_TITLES,
    },
    "zh": {
        "generated": "<!-- 由 tools/reading_path.py --markdown --lang zh 生成：请修改 tools/reading_path_notes.zh-CN.tsv，"
                     "然后重新生成（见下文）。 -->",
        "title": "# 读代码：一个训练步，逐个函数",
        "banner": "*本页由 `tools/reading_path.py` 在 {source} 上的输出生成；它测得的结果：*",
        "intro": [
            "这是 Scratchformer 的阅读路径：在 `{preset}` 构建中，`scratchformer train --config {config}` 的一个训练步"
            "所运行的函数，按训练步首次调用它们的顺序排列，并按阶段分组。对照源代码从上往下读，或者在 gdb 里逐个下断点"
            "（docs/debugging.zh-CN.md）。",
            "",
            "测量方法：`tools/reading_path.py` 以 gcov 覆盖率和 `-finstrument-functions` 构建 `{preset}` 预设，先训练 "
            "{n} 步、再训练 {n1} 步，保留执行次数增加了的函数：即一个训练步的函数（第 {n1} 步：普通的一步，不写日志行、"
            "不做验证）。一个小的钩子库记录它们首次调用的顺序和所属阶段。函数的长度是它的源代码行数（末行减首行加一）；"
            "多次实例化的模板只算一次。每句说明来自 `tools/reading_path_notes.zh-CN.tsv`。重新生成本页：",
            "",
            "    tools/reading_path.py --markdown --lang zh > docs/read-the-code.zh-CN.md",
            "",
            "目标（DESIGN.md）：一个训练步至多 {t1:,} 行，`{runtime}` 中为零行；整个一步命令至多 {t2:,} 行。"
            "实测：训练步 {step_lines:,} 行（其中 `{runtime}` 中 {runtime_lines:,} 行），整个命令 {command_lines:,} 行。",
        ],
        "stages": "## 一个训练步，按阶段",
        "summary": "## 整个一步命令，按阶段",
        "summary_intro": "一步命令运行的每个函数（配置、分词器、语料、构建模型、训练步、一个验证句子、检查点），"
                         "计入其首次调用时所处的阶段：训练步与构建模型共用的函数计入构建模型。"
                         "不带 `--markdown` 运行 `tools/reading_path.py` 会全部列出。",
        "table": "| 阶段 | 函数 | 行 |\n|---|---:|---:|",
        "command_over": "整个命令比 {t2:,} 行的目标多 {over:,} 行，我们有意保留：学生一个下午要读的训练步已达标，"
                        "其余大部分是让工具用起来可靠的代码。其中 {config:,} 行是命令行和配置文件：解析命令行之前要先声明"
                        "每个子命令的选项（`--help` 和拼错的选项才能得到回答），每个配置项都要检查，报错时写明是哪一项、"
                        "期望什么、实际是什么。{validation:,} 行是验证句子（贪心翻译和 BLEU），{checkpoint:,} 行是检查点。"
                        "要降到 {t2:,} 行，就得删掉这些报错信息或课程要用的功能。",
        "total": "| **合计** | **{f}** | **{l:,}** |",
        "functions_lines": "{f} 个函数，{l:,} 行",
        "missing": "（尚无说明：请在 tools/reading_path_notes.zh-CN.tsv 中添加）",
        "lines": lambda n: f"{n} 行",
        "entry": "- {where}（{lines}）：{sentence}",
        "stage_titles": {
            "batch": "batch：训练集的下一个批次",
            "forward": "forward：模型的 logits",
            "loss": "loss：标签平滑交叉熵",
            "backward": "backward：梯度",
            "optimizer": "optimizer：裁剪与更新",
            "loop": "loop：训练步外面的训练循环",
        },
        "phase_titles": {
            "config": "config：命令行、配置文件、运行目录",
            "tokenizer": "tokenizer：训练（或加载）SentencePiece",
            "corpus": "corpus：编码训练集和验证集，批处理器",
            "model": "model：构建模块、参数、优化器",
            "setup": "setup：指标文件、信号",
            "step": "step：训练步",
            "validation": "validation：在一个句子上算损失和 BLEU",
            "checkpoint": "checkpoint：写出 safetensors",
            "end": "end：最后几行输出，退出",
        },
    },
}


def print_markdown(result, lang, notes_path):
    t = MD[lang]
    notes = read_notes(notes_path)
    fig = result["figures"]
    source = f"commit `{result['commit']}`" if result.get("commit") else "the source tree"
    print(t["generated"])
    print(t["title"])
    print()
    print(t["banner"].format(source=source))
    print()
    print(f"    {figure_line(fig)}")
    print()
    for line in t["intro"]:
        print(line.format(config=result["config"], preset=result["preset"], n=result["steps"], n1=result["steps"] + 1,
                          t1=TARGET_STEP_LINES, t2=TARGET_COMMAND_LINES, runtime=RUNTIME,
                          step_lines=fig["step_lines"], runtime_lines=fig["step_runtime_lines"],
                          command_lines=fig["command_lines"]))
    print()
    print(t["stages"])
    missing = []
    for g, members in grouped(result["step"], STAGES):
        print()
        print(f"### {t['stage_titles'].get(g, g)}")
        print()
        print(t["functions_lines"].format(f=len(members), l=total_lines(members)))
        print()
        for e in members:
            sentence = note_for(notes, e)
            if not sentence:
                missing.append(e["name"])
            print(t["entry"].format(where=f"`{e['file']}:{e['line']}  {e['name']}`", lines=t["lines"](e["lines"]),
                                    sentence=sentence or t["missing"]))
    print()
    print(t["summary"])
    print()
    print(t["summary_intro"])
    print()
    print(t["table"])
    for g, members in grouped(result["command"], PHASES):
        print(f"| {t['phase_titles'].get(g, g)} | {len(members)} | {total_lines(members):,} |")
    print(t["total"].format(f=fig["command_functions"], l=fig["command_lines"]))
    if fig["command_lines"] > TARGET_COMMAND_LINES:
        phase = {g: total_lines(members) for g, members in grouped(result["command"], PHASES)}
        print()
        print(t["command_over"].format(t2=TARGET_COMMAND_LINES, over=fig["command_lines"] - TARGET_COMMAND_LINES,
                                       config=phase.get("config", 0), validation=phase.get("validation", 0),
                                       checkpoint=phase.get("checkpoint", 0)))
    if missing:
        say(f"{len(missing)} function(s) have no sentence in {notes_path}: " + ", ".join(missing))


def git_commit(src):
    """The short commit of the source tree (read only: uncommitted changes are not detected), or None."""
    try:
        out = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def output(result, args):
    if args.markdown:
        notes_path = args.notes or os.path.join(os.path.realpath(args.source), "tools", "reading_path_notes.zh-CN.tsv"
                                                if args.lang == "zh" else "reading_path_notes.tsv")
        print_markdown(result, args.lang, notes_path)
    else:
        print_text(result)


# ---- main -----------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="How it measures: see the top of tools/reading_path.py.")
    ap.add_argument("--source", default=ROOT, help="the source tree (default: the one this script is in)")
    ap.add_argument("--build-dir", help="build tree (default build/reading-path, with --release build/reading-path-release)")
    ap.add_argument("--steps", type=int, default=2, help="N: measure step N+1 against N steps (default 2)")
    ap.add_argument("--config", default="configs/quickstart.toml", help="config, relative to --source (default %(default)s)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="another override for every run (repeatable)")
    ap.add_argument("--skip-build", action="store_true", help="use the build that is there")
    ap.add_argument("--release", action="store_true", help="the same measurement on a release-flags build")
    ap.add_argument("--json", metavar="FILE", help="also write the measurement as JSON")
    ap.add_argument("--markdown", action="store_true", help="print docs/read-the-code.md instead of the list")
    ap.add_argument("--lang", choices=["en", "zh"], default="en", help="--markdown's language (default en)")
    ap.add_argument("--notes", help="sentences for --markdown (default tools/reading_path_notes[.zh-CN].tsv)")
    ap.add_argument("--keep-runs", action="store_true", help="keep the run directories, traces and logs")
    ap.add_argument("--from-json", metavar="FILE",
                    help="print a measurement saved before (BUILD/reading-path.json, --json) instead of measuring")
    args = ap.parse_args()
    if args.from_json:
        try:
            with open(args.from_json) as f:
                result = json.load(f)
            result["step"], result["command"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            fail(f"--from-json {args.from_json}: expected a measurement written by --json, got: {e}")
        for e in result["step"] + result["command"]:
            e["name"] = short_name(e.get("demangled", e["name"]))
        output(result, args)
        return 0
    if args.steps < 1:
        fail("--steps must be at least 1")
    src = os.path.realpath(args.source)
    build_dir = os.path.realpath(os.path.join(src, args.build_dir or
                                              ("build/reading-path-release" if args.release else "build/reading-path")))
    config = os.path.realpath(os.path.join(src, args.config))
    if not os.path.exists(config):
        fail(f"no config {config}")
    for tool in ("cmake", "gcov", "nm", "cc"):
        if not shutil.which(tool):
            fail(f"{tool} not found on PATH")

    t_start = time.time()
    build_seconds = build(src, build_dir, args.release, args.skip_build)
    exe = os.path.join(build_dir, "scratchformer")
    hooks = None if args.release else os.path.join(build_dir, "reading_path_hooks.so")
    if hooks and not os.path.exists(hooks):
        fail(f"no {hooks}: run once without --skip-build")
    symbols = read_symbols(exe)
    markers = marker_spec(symbols[1], symbols[2]) if hooks else ""
    reference_order = ({}, {})
    if args.release:
        ref = os.path.join(src, "build", "reading-path", "reading-path.json")
        if os.path.exists(ref):
            with open(ref) as f:
                r = json.load(f)
            reference_order = ({(e["file"], e["line"]): (e["seq"], e["group"]) for e in r["step"] if e["seq"] is not None},
                               {(e["file"], e["line"]): (e["seq"], e["group"]) for e in r["command"] if e["seq"] is not None})
        else:
            say(f"no {ref}: the release list is unordered (run the reference measurement first for stages)")

    work = tempfile.mkdtemp(prefix="reading-path-", dir=build_dir)
    funcs_by_run, traces, run_seconds = {}, {}, {}
    tokenizer_from = None
    n = args.steps
    try:
        for k in sorted({1, n, n + 1}):
            say(f"run: train {k} step{'s' if k > 1 else ''} ({os.path.relpath(config, src)}, counters reset)")
            run_dir = os.path.join(work, f"run-{k}")
            trace, seconds = run_training(exe, config, k, run_dir, build_dir, hooks, markers, tokenizer_from, args.set)
            tokenizer_from = tokenizer_from or run_dir
            run_seconds[k] = seconds
            funcs_by_run[k] = read_gcov(build_dir, src)
            if trace:
                traces[k] = trace
            say(f"run: {k} step{'s' if k > 1 else ''} took {seconds:.0f} s")
        step, command, notes = analyse(funcs_by_run, n, traces, symbols, reference_order)
    finally:
        if args.keep_runs:
            say(f"runs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    for note in notes:
        say(note)

    result = {
        "commit": git_commit(src),
        "config": os.path.relpath(config, src), "preset": "release" if args.release else "reference",
        "build_dir": os.path.relpath(build_dir, src), "steps": n, "figures": figures(step, command),
        "targets": {"step_lines": TARGET_STEP_LINES, "step_runtime_lines": 0, "command_lines": TARGET_COMMAND_LINES},
        "seconds": {"build": round(build_seconds, 1), "runs": {str(k): round(s, 1) for k, s in run_seconds.items()},
                    "total": round(time.time() - t_start, 1)},
        "notes": notes, "step": step, "command": command,
    }
    with open(os.path.join(build_dir, "reading-path.json"), "w") as f:
        json.dump(result, f, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    output(result, args)
    say(f"done in {time.time() - t_start:.0f} s (build {build_seconds:.0f} s, runs "
        + ", ".join(f"{k} step{'s' if k > 1 else ''} {s:.0f} s" for k, s in run_seconds.items()) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
