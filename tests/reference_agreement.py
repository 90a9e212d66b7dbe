#!/usr/bin/env python3
"""The reference build and the release build train the same model.

Trains configs/reverse.toml for 20 steps with the `reference` program (every kernel its plain
version, autograd/fast.h) and with the `release` program (the fast kernels), each from the same
seed on one thread, and compares the training loss of every step (metrics.tsv, log_every = 1).

Why they are not bit-identical, and the tolerance: the two builds compute the same formulas with
sums in another order (SIMD lanes, blocks, BLAS calls on other shapes) and float32 exp within 1 ulp
(fast_exp), so one step's loss differs in the last float32 bits (about 1e-7 relative). Adam then
divides each update by the gradient's running RMS: for a weight whose gradient is near zero, a
difference in the last bits can change its update by up to the learning rate, so the differences
grow from step to step; over these 20 steps they stay around 1e-6 to 1e-5 of the loss (the loss
is logged to 6 decimals). A wrong kernel (a missing term, a wrong transpose, a mask off by one)
changes the loss by percent within a few steps. So: every step within LOSS_RTOL = 1e-4 relative,
which leaves room for another CPU's BLAS kernels. The test also checks that it can fail: a run
with another seed must differ by more than that.

Usage: reference_agreement.py REFERENCE_BINARY RELEASE_BINARY SOURCE_DIR
Exit 77 (ctest: skipped) when the release program has not been built.
"""
import csv
import os
import subprocess
import sys
import tempfile

STEPS = 20
LOSS_RTOL = 1e-4


def train(binary, source_dir, run_dir, seed=1):
    """Trains reverse.toml for STEPS steps into run_dir; returns {step: loss}."""
    config = os.path.join(source_dir, "configs", "reverse.toml")
    overrides = [
        f"train.max_steps={STEPS}", "train.log_every=1", f"train.valid_every={10 * STEPS}",
        f"train.seed={seed}", "run.threads=1", f"run.dir={run_dir}",
        "data.test_src=", "data.test_tgt=",
    ]
    command = [binary, "train", "--config", config]
    for o in overrides:
        command += ["--set", o]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        print(result.stdout)
        raise SystemExit(f"{binary} train exited {result.returncode}")
    losses = {}
    with open(os.path.join(run_dir, "metrics.tsv"), newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["kind"] == "train":
                losses[int(row["step"])] = float(row["loss"])
    return losses


def worst_relative_difference(a, b):
    steps = sorted(set(a) & set(b))
    worst, at = 0.0, None
    for s in steps:
        d = abs(a[s] - b[s]) / abs(b[s])
        if d >= worst:
            worst, at = d, s
    return worst, at, len(steps)


def main():
    reference, release, source_dir = sys.argv[1:4]
    if not os.path.exists(release):
        print(f"skipped: no release program at {release} (cmake --build --preset release first)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        ref = train(reference, source_dir, os.path.join(tmp, "reference"))
        rel = train(release, source_dir, os.path.join(tmp, "release"))
        other_seed = train(release, source_dir, os.path.join(tmp, "seed2"), seed=2)
    worst, at, compared = worst_relative_difference(ref, rel)
    print(f"{compared} steps compared; largest relative loss difference reference vs release: "
          f"{worst:.2e} at step {at} (tolerance {LOSS_RTOL:.0e})")
    for s in sorted(ref):
        print(f"  step {s:2d}  reference {ref[s]:.6f}  release {rel.get(s, float('nan')):.6f}")
    failures = []
    if compared != STEPS:
        failures.append(f"expected {STEPS} logged steps in both runs, found {compared} in common")
    if worst > LOSS_RTOL:
        failures.append(f"the builds disagree: {worst:.2e} > {LOSS_RTOL:.0e} at step {at}")
    seed_worst, seed_at, _ = worst_relative_difference(other_seed, rel)
    print(f"another seed differs by {seed_worst:.2e} at step {seed_at} (must exceed the tolerance)")
    if seed_worst <= LOSS_RTOL:
        failures.append("a run with another seed is within the tolerance: the comparison could not fail")
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
