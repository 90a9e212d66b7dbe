#!/bin/sh
# The explorer's browser tests (tests/browser/explorer.test.mjs) as one ctest test, label
# "browser". Debian's chromium, headless, driven by puppeteer-core from node_modules (which
# downloads no browser). Exit 77 (ctest SKIP_RETURN_CODE) with one line when chromium, node or
# node_modules is missing, so a machine without them skips instead of failing.
#
#   tests/browser/run_browser_tests.sh BINARY [more options of explorer.test.mjs]
#   e.g. tests/browser/run_browser_tests.sh build/release/scratchformer --screenshots docs/screenshots
set -eu
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
binary=${1:?"usage: run_browser_tests.sh SCRATCHFORMER_BINARY [options]"}
shift
case "$binary" in /*) ;; *) binary="$(pwd)/$binary" ;; esac
chromium=${CHROMIUM:-/usr/bin/chromium}

if [ ! -x "$chromium" ]; then
  echo "SKIP: no chromium at $chromium (apt-get install chromium, or set CHROMIUM)"; exit 77
fi
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: no node on PATH (apt-get install nodejs npm)"; exit 77
fi
if [ ! -d "$here/node_modules/puppeteer-core" ]; then
  echo "SKIP: no tests/browser/node_modules (run: cd tests/browser && PUPPETEER_SKIP_DOWNLOAD=1 npm ci)"; exit 77
fi
cd "$source_dir"  # the configs name their data relative to the source folder
exec node "$here/explorer.test.mjs" --binary "$binary" --chromium "$chromium" \
  --config "$source_dir/configs/reverse.toml" --configs "$source_dir/configs" "$@"
