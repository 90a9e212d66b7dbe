#!/usr/bin/env bash
# Installs the Debian packages Scratchformer needs to build and test, skipping those already
# installed (so a second run takes a moment). Uses sudo when not run as root.
set -euo pipefail

packages=(
  g++ cmake make pkg-config          # toolchain
  python3                            # tools/function_lengths.py (a test), tools/*.py
  libopenblas-dev                    # matrix products (cblas_sgemm / cblas_dgemm)
  libdnnl-dev                        # oneDNN: bf16 matrix products on AMX / AVX512-BF16 (train.precision = "bf16")
  ocl-icd-opencl-dev                 # oneDNN's CMake config (Debian builds it with the OpenCL GPU runtime) runs
                                     # find_package(OpenCL): only a Recommends of libdnnl-dev, which we skip
  libcli11-dev                       # the command line
  catch2                             # tests (Catch2 v2)
  libsentencepiece-dev               # subword tokenisation
  libtoml11-dev                      # config files
  nlohmann-json3-dev                 # safetensors headers, test data
  libfmt-dev                         # formatting
  openmpi-bin libopenmpi-dev         # data-parallel training: mpirun -np N (train/distributed/distributed.h)
  gdb                                # the debugger test (tests/gdb) and docs/debugging.md
  fontconfig fonts-wqy-microhei      # a CJK font for the SVGs' Chinese text (5 MB; fonts-noto-cjk is 91 MB),
                                     # and fc-list / fc-match, with which tests/test_plots.cpp checks it
  clang-14 libclang-rt-14-dev libomp-14-dev   # libFuzzer targets (tests/fuzz, tools/run_fuzzers.sh)
  libcpp-httplib-dev                 # `scratchformer serve`: the explorer's HTTP server (train/explorer/server.cpp)
  chromium                           # the explorer's browser tests, headless (tests/browser)
  dpkg-dev file                      # cpack -G DEB: dpkg-shlibdeps finds the packages of the linked libraries (tests/install)
  strace                             # the install test checks that the installed program opens no file of the checkout
  python3-torch python3-sentencepiece  # tools/torch_model.py (the model in plain PyTorch) and its test
                                     # (tests/torch); make_reference.py and bench_pytorch.py; never the framework
)
# node and npm drive chromium in the browser tests (puppeteer-core); a machine that has a node
# of its own keeps it
command -v node >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# puppeteer-core for the browser tests, at the versions package-lock.json pins (it downloads no
# browser: the tests use Debian's chromium); once, into tests/browser/node_modules
browser_tests="$(dirname "$0")/../tests/browser"
if [ ! -d "$browser_tests/node_modules/puppeteer-core" ]; then
  echo "install-deps: npm ci in tests/browser (puppeteer-core)"
  (cd "$browser_tests" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
