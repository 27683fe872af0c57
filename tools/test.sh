#!/usr/bin/env bash
# jitmm tests: install the packages, build into build/ (or $JITMM_BUILD_DIR), run every test through ctest.
# Exits non-zero on any failure; the last line is ctest's "N% tests passed, M tests failed out of T".
# Usage: tools/test.sh [extra ctest arguments, e.g. -R install_consumer]
# Environment: JITMM_BUILD_DIR (default build), JITMM_TEST_JOBS (default 2), JITMM_TEST_TIMEOUT (seconds per
# test, default 1200), JITMM_CUDA_ROOT, JITMM_SKIP_DEPS=1. The tests get a fresh disk cache in
# <build>/test-cache unless JITMM_CACHE_DIR is set.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=tools/deps.sh
source tools/deps.sh

build_dir=${JITMM_BUILD_DIR:-build}
jitmm_install_deps
jitmm_build "$build_dir"

if [[ -z "${JITMM_CACHE_DIR+set}" ]]; then
  JITMM_CACHE_DIR="$(cd "$build_dir" && pwd)/test-cache"
  export JITMM_CACHE_DIR
  rm -rf "$JITMM_CACHE_DIR"
fi

log="$build_dir/ctest.log"
jitmm_log "running ctest in $build_dir (log: $log)"
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "${JITMM_TEST_JOBS:-2}" \
  --timeout "${JITMM_TEST_TIMEOUT:-1200}" "$@" 2>&1 | tee "$log" || status=$?
summary=$(grep -E 'tests passed|tests failed|No tests were found' "$log" | tail -n 1 || true)
echo
echo "${summary:-ctest printed no summary (exit status $status)}"
exit "$status"
