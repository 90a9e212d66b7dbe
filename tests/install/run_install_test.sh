#!/usr/bin/env bash
# The installed Scratchformer, used as a student or a teacher would, with the source tree out of
# reach: `cmake --install` into a temporary prefix; the installed program run from an empty folder
# (configs by name, the shipped corpora, a bad corpus path); every example project built from the
# installed copy (PREFIX/share/doc/scratchformer/examples) against find_package(Scratchformer)
# only, and example (d) also with pkg-config and a plain g++ line. With strace on the machine,
# every file the program opens is checked to lie outside the source tree.
#
#   run_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
source_dir=$(realpath "$2")
tmp=$(mktemp -d /tmp/sf_install_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
started=$(date +%s)
step() { echo "== [$(( $(date +%s) - started )) s] $*"; }

step "cmake --install $build --prefix PREFIX"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(cd "$prefix" && ls -d lib*/cmake/Scratchformer | sed 's|/cmake/Scratchformer||')
for f in bin/scratchformer include/scratchformer/autograd/tensor.h include/scratchformer/nn/attention.h \
         include/scratchformer/train/checkpoint/checkpoint.h "$libdir"/libscratchformer_autograd.a \
         "$libdir"/cmake/Scratchformer/ScratchformerConfig.cmake "$libdir"/pkgconfig/scratchformer.pc \
         share/scratchformer/configs/quickstart.toml share/scratchformer/data/corpora/multi30k/SOURCE.md \
         share/scratchformer/data/corpora/tatoeba-cmn-eng/SOURCE.md share/scratchformer/gdb/scratchformer_printers.py \
         share/doc/scratchformer/README.md share/doc/scratchformer/docs/guide.md \
         share/doc/scratchformer/examples/core/CMakeLists.txt; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
if grep -rIl "$source_dir" "$prefix/$libdir/cmake" "$prefix/$libdir/pkgconfig" "$prefix/include"; then
  fail "the installed package files above name the source tree $source_dir"
fi

# The installed program, from an empty folder, with a clean environment: nothing from the checkout.
work=$tmp/work
mkdir -p "$work" "$tmp/home"
sf() { (cd "$work" && env -i PATH=/usr/bin:/bin HOME="$tmp/home" LANG=C.UTF-8 OMP_NUM_THREADS=2 "$prefix/bin/scratchformer" "$@"); }
traced() {  # like sf, recording every file the program opens (when strace is there)
  if command -v strace >/dev/null && strace -f -qq --seccomp-bpf -e trace=%file -o /dev/null true 2>/dev/null; then
    (cd "$work" && env -i PATH=/usr/bin:/bin HOME="$tmp/home" LANG=C.UTF-8 OMP_NUM_THREADS=2 \
      strace -f -qq --seccomp-bpf -e trace=%file -o "$tmp/files.log" "$prefix/bin/scratchformer" "$@")
    if grep -F "$source_dir" "$tmp/files.log" | grep -v ENOENT | head -3 | grep .; then
      fail "scratchformer $1 opened files in the source tree (above)"
    fi
  else
    sf "$@"
  fi
}

step "scratchformer configs"
sf configs --lang en > "$tmp/configs.txt"
grep -q "^  quickstart " "$tmp/configs.txt" || fail "configs does not list quickstart: $(cat "$tmp/configs.txt")"
grep -q "$prefix/share/scratchformer/configs" "$tmp/configs.txt" || fail "configs does not name the installed folder"

step "scratchformer train --config reverse (by name, from an empty folder)"
traced train --config reverse --set train.max_steps=40 --set train.valid_every=40 > "$tmp/train.txt" 2>&1 ||
  fail "train: $(tail -5 "$tmp/train.txt")"
checkpoint=$work/runs/reverse/checkpoint-last.safetensors
[ -f "$checkpoint" ] || fail "no $checkpoint (the run of an installed config goes to ./runs/NAME)"
grep -q "$prefix/share/scratchformer/data/corpora/reverse/train.src" "$work/runs/reverse/config.toml" ||
  fail "the run's config.toml does not read the installed corpus"
echo "ka ra mi wa" | sf translate --checkpoint "$checkpoint" > /dev/null || fail "translate with the installed program"

step "scratchformer demo masks (the shipped Multi30k, found from the program's place)"
traced demo masks --out-dir "$tmp/demo" > "$tmp/demo.txt" 2>&1 || fail "demo masks: $(tail -3 "$tmp/demo.txt")"

step "a config copied out, naming a corpus found nowhere: one line naming both places, exit 2"
sed 's|data/corpora/reverse/train.src|data/corpora/nowhere/train.src|' "$prefix/share/scratchformer/configs/reverse.toml" > "$work/mine.toml"
set +e
sf train --config mine.toml > "$tmp/bad.txt" 2>&1
status=$?
set -e
[ "$status" -eq 2 ] || fail "expected exit 2, got $status: $(cat "$tmp/bad.txt")"
[ "$(wc -l < "$tmp/bad.txt")" -eq 1 ] || fail "expected one line: $(cat "$tmp/bad.txt")"
grep -q "$work/../data/corpora/nowhere/train.src\|$tmp/data/corpora/nowhere/train.src" "$tmp/bad.txt" || fail "the place beside the config is not named: $(cat "$tmp/bad.txt")"
grep -q "$prefix/share/scratchformer/data/corpora/nowhere/train.src" "$tmp/bad.txt" || fail "the data folder is not named: $(cat "$tmp/bad.txt")"
cp "$prefix/share/scratchformer/configs/reverse.toml" "$work/copied.toml"  # a plain copy finds the installed corpora
sf summary --config copied.toml > /dev/null || fail "a config copied out of the installed configs"

step "the examples, built from the installed copies against find_package(Scratchformer) only"
examples=$prefix/share/doc/scratchformer/examples
for ex in core new-op tiny-model translate; do
  start=$(date +%s)
  env -i PATH=/usr/bin:/bin HOME="$tmp/home" cmake -S "$examples/$ex" -B "$tmp/ex/$ex" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/ex-$ex.log" 2>&1 ||
    fail "configure $ex: $(tail -20 "$tmp/ex-$ex.log")"
  env -i PATH=/usr/bin:/bin HOME="$tmp/home" cmake --build "$tmp/ex/$ex" -j2 >> "$tmp/ex-$ex.log" 2>&1 || fail "build $ex: $(tail -20 "$tmp/ex-$ex.log")"
  if grep -F -- "-I$source_dir" "$tmp/ex/$ex/CMakeFiles/"*.dir/flags.make 2>/dev/null; then fail "$ex compiles with the source tree's headers"; fi
  echo "   $ex built in $(( $(date +%s) - start )) s"
done
(cd "$work" && "$tmp/ex/core/core") > "$tmp/core.txt" || fail "example core"
grep -q "grad_fn=<Sum>" "$tmp/core.txt" || fail "example core printed: $(cat "$tmp/core.txt")"
(cd "$work" && "$tmp/ex/new-op/new_op") > "$tmp/new-op.txt" || fail "example new-op: $(cat "$tmp/new-op.txt")"
(cd "$work" && "$tmp/ex/tiny-model/tiny_model") > "$tmp/tiny.txt" || fail "example tiny-model: $(tail -3 "$tmp/tiny.txt")"
echo "ka ra mi wa" | (cd "$work" && "$tmp/ex/translate/translate" "$checkpoint") > "$tmp/translate.txt" || fail "example translate"
echo "ka ra mi wa" | sf translate --beam 1 --checkpoint "$checkpoint" > "$tmp/cli.txt"
cmp -s "$tmp/translate.txt" "$tmp/cli.txt" || fail "example translate printed '$(cat "$tmp/translate.txt")', the CLI '$(cat "$tmp/cli.txt")'"

step "find_package with a dependency missing: CMake's error names it"
if env -i PATH=/usr/bin:/bin HOME="$tmp/home" PKG_CONFIG_LIBDIR=/nonexistent \
     cmake -S "$examples/core" -B "$tmp/ex/missing" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/missing.log" 2>&1; then
  fail "find_package(Scratchformer) succeeded without the openblas pkg-config module"
fi
grep -q "Scratchformer needs openblas" "$tmp/missing.log" || fail "the error does not name openblas: $(grep -A8 'CMake Error' "$tmp/missing.log")"

step "example core with pkg-config and g++"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
# shellcheck disable=SC2046
g++ "$examples/core/main.cpp" -o "$tmp/core_pc" $(pkg-config --cflags --libs scratchformer) || fail "g++ with pkg-config scratchformer"
"$tmp/core_pc" | grep -q "grad_fn=<Sum>" || fail "the pkg-config build of example core"
echo "install test: all passed"
