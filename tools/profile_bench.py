#!/usr/bin/env python3
"""Where a training step's time goes: `perf record` of `scratchformer bench`, training steps only.

    tools/profile_bench.py [--threads 1] [--steps 6] [--top 25] [--precision float32|bf16]
                           [--binary build/release/scratchformer]

Runs `perf record -g` on `scratchformer bench --config configs/bench.toml --decode-sentences 0`,
keeps the samples taken during the timed training steps (from the end of the warm-up step, its first
optimizer update, to the last sample whose call stack shows the step function; BLAS's own frames
carry no stack, so the cut is by time) and prints the functions they were in, as a share of
those samples, grouped as BLAS (OpenBLAS's sgemm kernels and packing), the small attention
products (small_gemm), scratchformer's own kernels, and the kernel/libc rest;
with several threads, also each thread's share of its own samples spent waiting in OpenMP (a
core that ran slower leaves the other one waiting at the end of every parallel loop, and the
workers wait through the main thread's serial work between loops).
The bench trains in float32 first, then (on a CPU with bf16 units) the same steps in bf16;
--precision picks which of the two the profile covers (the cut between them is the float32
floor's first sample). oneDNN's bf16 kernels are generated at run time and show as "[unknown]".
Needs Linux perf (Debian: apt-get install linux-perf) and permission to use it
(/proc/sys/kernel/perf_event_paranoid <= 1, or root). Python standard library only.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile


def parse_samples(script_text):
    """perf script output -> [(time, [frame symbol, ...innermost first], thread id)]."""
    samples = []
    for block in script_text.split("\n\n"):
        lines = [l.strip() for l in block.strip().split("\n") if l.strip()]
        if len(lines) < 2:
            continue
        header = lines[0].split()  # command, thread id, time:, period, event
        at = [i for i, w in enumerate(header) if w.endswith(":") and w[:-1].replace(".", "").isdigit()]
        if not at:
            continue
        tid = header[at[0] - 1] if at[0] > 0 else "?"
        frames = [" ".join(l.split()[1:]).split("+0x")[0] for l in lines[1:]]
        samples.append((float(header[at[0]][:-1]), frames, tid))
    return samples


def is_optimizer_step(frame):
    """True for the optimizer's update (sf::train::Adam::step, SGD::step), the end of a training step."""
    return frame.startswith("sf::train::") and frame.split(" (")[0].endswith("::step")


def warmup_end(samples, start, end):
    """The time the timed steps start: after the bench's warm-up step, which ends with its first optimizer
    update. Everything before it -- building the model, Adam's zeroed moments, the first touch of every
    tensor's pages (a page fault each) -- is not what a step costs once training runs."""
    in_update = [t for t, f, _ in samples if start <= t <= end and any(is_optimizer_step(x) for x in f)]
    if not in_update:
        fail("no optimizer step in the profile: cannot tell the warm-up step from the timed ones")
    first = min(in_update)
    after = [t for t, f, _ in samples if first < t <= end and any("training_step" in x for x in f)
             and not any(is_optimizer_step(x) for x in f)]
    if not after:
        fail("no training step after the warm-up step in the profile (run with --steps 2 or more)")
    return min(after)


def group_of(symbol):
    if symbol.startswith("sgemm_") or symbol.startswith("dgemm_") or "memset" in symbol:
        return "BLAS (sgemm kernels, packing, zeroing C)"
    if "small_gemm" in symbol:
        return "attention's small products (small_gemm)"
    if symbol.startswith("sf::"):
        return "scratchformer kernels"
    if "libdnnl" in symbol or "/perf-" in symbol:  # oneDNN, and the kernels it generates at run time
        return "oneDNN (bf16 matrix products)"
    if "libgomp" in symbol:
        return "OpenMP runtime (threads waiting at barriers)"
    return "kernel, libc, other"


def fail(message):
    """One line on stderr, exit status 2: the project's convention for a bad input."""
    print(f"profile_bench: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/release/scratchformer")
    ap.add_argument("--config", default="configs/bench.toml")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--precision", choices=["float32", "bf16"], default="float32",
                    help="which of the bench's two timed trainings to profile (default float32)")
    args = ap.parse_args()
    if not os.path.exists(args.binary):
        fail(f"no binary at {args.binary} (build it first: cmake --build --preset release)")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        cmd = ["perf", "record", "-g", "-o", data, args.binary, "bench", "--config", args.config, "--steps",
               str(args.steps), "--warmup", "1", "--decode-sentences", "0", "--threads", str(args.threads)]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError:
            fail("`perf` is not installed (Debian: apt-get install linux-perf)")
        if run.returncode != 0:
            lines = run.stderr.strip().splitlines() or ["no message"]
            own = [l for l in lines if l.startswith("scratchformer")]  # the bench's own error, if it gave one
            fail(f"the bench failed (exit {run.returncode}): {(own or lines)[-1]}")
        step_line = [l for l in run.stdout.splitlines() if "training step" in l or "step / floor" in l]
        script = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True).stdout
    samples = parse_samples(script)
    in_step = [t for t, f, _ in samples if any("training_step" in x or "time_training" in x for x in f)]
    if not in_step:
        fail("no samples inside the training step (is the binary built with symbols, -g?)")
    # The bench runs: float32 steps, float32 floor (time_blas), bf16 steps, bf16 floor. Samples in
    # generated or BLAS code often carry no call stack, so the phases are told apart by time: the
    # float32 steps end at the first sample of the floor, the bf16 steps are the step samples after it.
    in_floor = [t for t, f, _ in samples if any("time_blas" in x or "run_gemm" in x for x in f)]
    if in_floor:
        after_floor = [t for t in in_step if t > min(in_floor)]
        if args.precision == "bf16":
            if not after_floor:
                fail("no bf16 steps in the profile: this CPU has no bf16 units (the bench's 'bf16' line says why)")
            in_step = after_floor
        else:
            in_step = [t for t in in_step if t < min(in_floor)]
    start, end = warmup_end(samples, min(in_step), max(in_step)), max(in_step)
    chosen = [(f, tid) for t, f, tid in samples if start <= t <= end]
    total = len(chosen)
    by_symbol = collections.Counter(f[0] for f, _ in chosen)
    by_group = collections.Counter(group_of(f[0]) for f, _ in chosen)
    print(f"scratchformer bench, {args.threads} thread(s), {args.precision}: {total} samples in the training steps"
          f" ({end - start:.1f} s; the model's construction and the warm-up step left out)")
    for line in step_line:
        print("  " + line.strip())
    print("\nby group:")
    for g, n in by_group.most_common():
        print(f"  {100 * n / total:5.1f}%  {g}")
    # OpenMP waiting per thread: a thread spins at a loop's end until the others are done, so with
    # equal shares of work the faster core waits (a busy neighbour on a VM, a smaller core, a core
    # shared with perf itself), and the workers wait through the main thread's serial work.
    threads = collections.defaultdict(lambda: [0, 0])  # thread id -> [samples, samples in libgomp]
    for f, tid in chosen:
        threads[tid][0] += 1
        threads[tid][1] += group_of(f[0]).startswith("OpenMP")
    if len(threads) > 1:
        ids = sorted(threads, key=lambda x: int(x) if x.isdigit() else 0)  # the main thread's id is the lowest
        shares = [f"{'main' if i == 0 else 'worker ' + str(i)} {100 * threads[tid][1] / threads[tid][0]:.1f}%"
                  for i, tid in enumerate(ids)]
        print("\nOpenMP waiting, share of each thread's own samples: " + ", ".join(shares))
    print(f"\ntop {args.top} functions:")
    for s, n in by_symbol.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {s[:110]}")


if __name__ == "__main__":
    main()
