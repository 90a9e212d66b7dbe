#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) and runs each for a bounded time, starting from the
# committed seed corpus. Exits non-zero if any target finds a crash, a sanitizer report, a hang, a
# leak or an out-of-memory, keeping the input that caused it.
#
#   tools/run_fuzzers.sh          # 60 s per target
#   tools/run_fuzzers.sh 300      # 5 minutes per target
#
# Environment (all optional):
#   SF_FUZZ_CXX        the clang to build with (default clang++-14)
#   SF_FUZZ_BUILD_DIR  the build tree (default build/fuzz)
#   SF_FUZZ_TARGETS    which targets to run (default "safetensors config corpus explorer")
#
# Everything a run produces is under $SF_FUZZ_BUILD_DIR/out/:
#   corpus/<target>/   inputs the run found that reach new code (the seeds are never modified)
#   crashes/<target>/  crash-*, leak-*, timeout-*, oom-*: the inputs that failed
#   <target>.log       libFuzzer's full output
# To turn a failure into a regression test: minimise it, copy it to
# tests/data/fuzz-regressions/<target>/, and see tests/test_fuzz_regressions.cpp.
#   build/fuzz/fuzz_config -minimize_crash=1 -runs=20000 -exact_artifact_path=min CRASH_FILE
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: tools/run_fuzzers.sh [SECONDS_PER_TARGET]   (got '$seconds')" >&2
  exit 2
fi
cxx=${SF_FUZZ_CXX:-clang++-14}
build=${SF_FUZZ_BUILD_DIR:-build/fuzz}
targets=${SF_FUZZ_TARGETS:-safetensors config corpus explorer}
out="$build/out"

# Longest input per target: room for the seeds (the largest is configs/reverse.toml, 3.9 KB) and
# for mutations of them, small enough to keep runs fast. explorer: a request line and a body, room
# for a text over its 1000-byte limit.
declare -A max_len=([safetensors]=4096 [config]=6144 [corpus]=4096 [explorer]=4096)

echo "== fuzz: building with $cxx in $build"
cmake -S tests/fuzz -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$build" -j2

# UB already aborts (-fno-sanitize-recover); ask for its stack trace. Leaks are reported by ASan.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

failed=()
for t in $targets; do
  mkdir -p "$out/corpus/$t" "$out/crashes/$t"
  log="$out/$t.log"
  echo "== fuzz_$t: ${seconds} s, inputs up to ${max_len[$t]} bytes"
  # The first folder receives new inputs; the committed seeds are only read.
  # -timeout: one input running this long is a hang; -rss_limit_mb also caps any single malloc.
  set +e
  "$build/fuzz_$t" "$out/corpus/$t" "tests/fuzz/corpus/$t" \
    -dict="tests/fuzz/$t.dict" -max_len="${max_len[$t]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/crashes/$t/" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  found=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
  echo "fuzz_$t: ${runs:-?} executions (${speed:-?}/s), ${found:-?} new inputs, exit code $rc"
  artifacts=$(find "$out/crashes/$t" -type f | sort)
  if [ "$rc" -ne 0 ] || [ -n "$artifacts" ]; then
    failed+=("$t")
    echo "fuzz_$t: FAILED; the report, stack frames shortened (full log: $log):"
    # From the first error line: the error, the stack frames (each cut to 160 characters), the
    # sanitizer's SUMMARY line and libFuzzer's verdict.
    sed -n '/^==[0-9]*==ERROR\|runtime error:\|^fuzz_[a-z]*: \|^==[0-9]*== ERROR: libFuzzer/,$p' "$log" |
      grep -E '^==|runtime error:|^fuzz_[a-z]+: |^ +#[0-9]+ |^SUMMARY|^MS:|^artifact_prefix' | cut -c1-160 | head -50
    [ -s "$log" ] || echo "(the log is empty)"
    for a in $artifacts; do
      echo "-- failing input kept at $a ($(stat -c %s "$a") bytes), base64:"
      head -c 4096 "$a" | base64
    done
  fi
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "== fuzz: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "== fuzz: no failures"
