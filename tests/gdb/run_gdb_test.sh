#!/bin/sh
# The gdb pretty-printers cannot rot: run gdb in batch mode on attention_demo, stop inside
# MultiHeadAttention::forward, print tensors and a graph node, and check what gdb printed.
#
# usage: run_gdb_test.sh ATTENTION_DEMO SOURCE_DIR
# Exit 0 pass, 1 fail, 77 skipped (no gdb, no Python in gdb, or no permission to debug), which
# CTest reports as skipped (SKIP_RETURN_CODE 77, see tests/CMakeLists.txt).
#
# Checked, in this order:
#   1. gdb loaded the printers by itself from the program's .debug_gdb_scripts section (the
#      safe path is given here as a user gives it in ~/.gdbinit; -nx ignores any ~/.gdbinit);
#   2. `p x_q` at the top of forward: shape, dtype, strides, requires_grad, name;
#   3. `p q` once q is made: the transposed view's shape and strides, grad_fn=<Permute>, and its
#      first values equal to those the demo computes by itself and prints ("expected q: ...");
#   4. q's grad_fn as a shared_ptr<Node>, sf-print (the last head's block) and sf-graph down to
#      the q_proj weight's AccumulateGrad node;
#   5. after backward, the q_proj weight's gradient read WITHOUT calling into the program (the
#      fallback docs/debugging.md gives for VMs where `p t.grad()` fails with "Couldn't write
#      extended state status"): sf-grad, `p *t.impl_._M_ptr->grad._M_ptr` and `x/8f` on its data
#      pointer, which must agree with each other.
set -u
demo=$1
src=$2

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; echo "---- gdb output ----"; cat "$out"; exit 1; }

command -v gdb >/dev/null 2>&1 || skip "gdb is not installed (Debian: apt-get install gdb)"
gdb -batch -nx -ex 'python print("python-" + "ok")' 2>/dev/null | grep -q python-ok ||
  skip "this gdb has no Python, which the pretty-printers need"

out=$(mktemp "${TMPDIR:-/tmp}/sf-gdb-test.XXXXXX")
trap 'rm -f "$out"' EXIT

# Under AddressSanitizer, LeakSanitizer cannot run inside a debugger: turn it off for this run.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS

# The line of the demo's last printf (after backward), found by its text: line numbers move.
after_backward=$(grep -n 'std::printf("out %s' "$src/tests/gdb/attention_demo.cpp" | cut -d: -f1)
[ -n "$after_backward" ] || { echo "FAILED: no 'std::printf(\"out %s' line in tests/gdb/attention_demo.cpp"; exit 1; }
grad='attn.q_proj->weight.impl_._M_ptr->grad._M_ptr'

# split_heads makes q: finish returns from it into forward, next completes `Tensor q = ...`.
gdb -batch -nx \
  -iex "add-auto-load-safe-path $src" \
  -ex "info auto-load python-scripts" \
  -ex "break sf::nn::MultiHeadAttention::forward" \
  -ex "run" \
  -ex "echo ==== x_q\\n" -ex "print x_q" \
  -ex "tbreak split_heads" -ex "continue" -ex "finish" -ex "next" \
  -ex "echo ==== q\\n" -ex "print q" \
  -ex "echo ==== grad_fn\\n" -ex "print q.impl_._M_ptr->grad_fn" \
  -ex "echo ==== sf-print\\n" -ex "sf-print q" \
  -ex "echo ==== sf-graph\\n" -ex "sf-graph q" \
  -ex "delete" -ex "break attention_demo.cpp:$after_backward" -ex "continue" \
  -ex "echo ==== sf-grad\\n" -ex "sf-grad -n 8 attn.q_proj->weight" \
  -ex "echo ==== grad-impl\\n" -ex "print *$grad" \
  -ex "echo ==== x8f\\n" -ex "x/8f (float*)$grad->storage._M_ptr->data" \
  -ex "echo ==== end\\n" \
  -ex "kill" \
  --args "$demo" >"$out" 2>&1

if grep -q -e "ptrace: Operation not permitted" -e "Could not trace the inferior" "$out"; then
  skip "gdb may not trace processes here (ptrace is not permitted)"
fi

# Prints the gdb output after the line "==== NAME" up to the next "====" line.
section() { sed -n "/^==== $1\$/,/^====/p" "$out"; }
expect() {  # expect SECTION TEXT WHAT
  section "$1" | grep -q -F -e "$2" || fail "$3: expected '$2' after ==== $1"
}

grep -q "^Yes .*scratchformer_printers.py" "$out" ||
  fail "gdb did not auto-load tools/gdb/scratchformer_printers.py from .debug_gdb_scripts"

expect x_q "= Tensor shape=(2, 5, 16) dtype=float32 strides=(80, 16, 1) requires_grad=false" "p x_q"
expect x_q 'name="x"' "p x_q"

expect q "= Tensor shape=(2, 4, 5, 4) dtype=float32 strides=(80, 4, 16, 1)" "p q"
expect q "requires_grad=true grad_fn=<Permute>" "p q"
values=$(sed -n 's/^expected q: //p' "$out")
[ -n "$values" ] || fail "the demo did not print its expected q values"
expect q "$values" "p q (values read through the strides)"

expect grad_fn "<Permute> -> (2, 4, 5, 4) float32, inputs: <" "p q.impl_._M_ptr->grad_fn"
expect sf-print "shape=(2, 4, 5, 4) dtype=float32" "sf-print q"
expect sf-print "[1, 3, :, :] =" "sf-print q (one block per batch and head)"
expect sf-graph "<Permute> -> (2, 4, 5, 4) float32" "sf-graph q"
expect sf-graph '<AccumulateGrad> into leaf "weight" (16, 16)' "sf-graph q (down to the q_proj weight)"

expect sf-grad "grad of attn.q_proj->weight: shape=(16, 16) dtype=float32 strides=(16, 1)" "sf-grad"
expect grad-impl "= TensorImpl shape=(16, 16) dtype=float32 strides=(16, 1) requires_grad=false values=[" "p *t.impl_._M_ptr->grad._M_ptr"
# x/8f prints "ADDRESS:<tab>v0<tab>v1 ...": its first value, to 4 decimals, opens both other listings.
first=$(section x8f | sed -n 's/^0x[0-9a-f]*:[[:space:]]*\([-0-9.e+]*\).*/\1/p' | head -n 1)
[ -n "$first" ] || fail "x/8f on the gradient's data pointer printed no floats"
first=$(printf '%.4f' "$first")
expect grad-impl "values=[$first," "p *...grad._M_ptr agrees with x/8f"
expect sf-grad "[$first," "sf-grad agrees with x/8f"

echo "gdb printed the expected tensors:"
grep "^\\$" "$out"
exit 0
