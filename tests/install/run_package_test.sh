#!/usr/bin/env bash
# The Debian packages: `cpack -G DEB` from a build tree gives scratchformer_*.deb (the program,
# configs, corpora, docs) and libscratchformer-dev_*.deb (headers, libraries, CMake package). Their
# control fields are checked (Depends: of the program from dpkg-shlibdeps, naming the libraries it
# links), then their file lists, then both are unpacked with dpkg -x into a temporary root and the
# program found there trains the reverse task for a few steps, from an empty folder.
#
#   run_package_test.sh BUILD_DIR SOURCE_DIR     (exit 77, skipped, without dpkg-deb/dpkg-shlibdeps)
set -euo pipefail
build=$(realpath "$1")
source_dir=$(realpath "$2")
for tool in cpack dpkg-deb dpkg-shlibdeps file; do
  command -v "$tool" >/dev/null || { echo "SKIP: no $tool (tools/install-deps.sh installs it)"; exit 77; }
done
tmp=$(mktemp -d /tmp/sf_package_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== cpack -G DEB"
start=$(date +%s)
(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" > "$tmp/cpack.log" 2>&1) || fail "cpack: $(tail -20 "$tmp/cpack.log")"
echo "   $(( $(date +%s) - start )) s"
program_deb=$(ls "$tmp"/out/scratchformer_*.deb 2>/dev/null | head -1)
dev_deb=$(ls "$tmp"/out/libscratchformer-dev_*.deb 2>/dev/null | head -1)
[ -n "$program_deb" ] || fail "no scratchformer_*.deb in $(ls "$tmp/out")"
[ -n "$dev_deb" ] || fail "no libscratchformer-dev_*.deb in $(ls "$tmp/out")"
ls -l "$program_deb" "$dev_deb" | awk '{print "   " $5 " bytes  " $NF}'

echo "== control fields"
field() { dpkg-deb -f "$1" "$2"; }
[ "$(field "$program_deb" Package)" = scratchformer ] || fail "Package: $(field "$program_deb" Package)"
[ "$(field "$program_deb" Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture: $(field "$program_deb" Architecture)"
depends=$(field "$program_deb" Depends)
echo "   Depends: $depends"
# every shared library the program links, as dpkg-shlibdeps names its package
for lib in libopenblas libsentencepiece libdnnl libgomp libstdc++ libc6; do
  echo "$depends" | grep -q "$lib" || fail "Depends: has no $lib*: $depends"
done
dev_depends=$(field "$dev_deb" Depends)
for pkg in "scratchformer (= $(field "$program_deb" Version))" libopenblas-dev libsentencepiece-dev libdnnl-dev nlohmann-json3-dev; do
  echo "$dev_depends" | grep -qF "$pkg" || fail "libscratchformer-dev Depends: has no $pkg: $dev_depends"
done

echo "== file lists"
dpkg-deb -c "$program_deb" | awk '{print $NF}' > "$tmp/program.files"
dpkg-deb -c "$dev_deb" | awk '{print $NF}' > "$tmp/dev.files"
for f in ./usr/bin/scratchformer ./usr/share/scratchformer/configs/quickstart.toml \
         ./usr/share/scratchformer/data/corpora/multi30k/SOURCE.md ./usr/share/scratchformer/data/corpora/tatoeba-cmn-eng/SOURCE.md \
         ./usr/share/scratchformer/gdb/scratchformer_printers.py ./usr/share/doc/scratchformer/README.zh-CN.md; do
  grep -qxF "$f" "$tmp/program.files" || fail "scratchformer_*.deb lacks $f"
done
grep -q '^./usr/include/scratchformer/autograd/tensor.h$' "$tmp/dev.files" || fail "the -dev package lacks the headers"
grep -q '/cmake/Scratchformer/ScratchformerConfig.cmake$' "$tmp/dev.files" || fail "the -dev package lacks the CMake package"
grep -q '/pkgconfig/scratchformer.pc$' "$tmp/dev.files" || fail "the -dev package lacks scratchformer.pc"
grep -q '/libscratchformer_autograd.a$' "$tmp/dev.files" || fail "the -dev package lacks the libraries"
if grep -q include "$tmp/program.files" || grep -q 'bin/' "$tmp/dev.files"; then fail "a file is in the wrong package"; fi
if grep -v '^./usr/' "$tmp/program.files" "$tmp/dev.files" | grep -v ':./$'; then fail "files outside /usr (above)"; fi

echo "== dpkg -x into a temporary root, then train there"
root=$tmp/root
dpkg -x "$program_deb" "$root"
dpkg -x "$dev_deb" "$root"
mkdir -p "$tmp/work" "$tmp/home"
run() { (cd "$tmp/work" && env -i PATH=/usr/bin:/bin HOME="$tmp/home" LANG=C.UTF-8 "$root/usr/bin/scratchformer" "$@"); }
run --version
run train --config reverse --set train.max_steps=20 --set train.valid_every=20 > "$tmp/train.log" 2>&1 || fail "train: $(tail -5 "$tmp/train.log")"
[ -f "$tmp/work/runs/reverse/checkpoint-last.safetensors" ] || fail "no checkpoint in ./runs/reverse"
grep -q "$root/usr/share/scratchformer/data/corpora/reverse" "$tmp/work/runs/reverse/config.toml" || fail "not trained on the unpacked corpus"
if grep -q "$source_dir" "$tmp/work/runs/reverse/config.toml"; then fail "the run read the source tree"; fi
echo "package test: all passed"
