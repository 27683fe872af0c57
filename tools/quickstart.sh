#!/usr/bin/env bash
# jitmm quick start on a fresh Debian machine: install the packages, build Release into build/,
# print the probe of this machine, then JIT a few matmuls and print a table (GFLOP/s, JIT time, error).
# Usage: tools/quickstart.sh [extra cmake arguments, e.g. -DJITMM_CUDA_ROOT=/opt/cuda]
# Environment: JITMM_BUILD_DIR (default build), JITMM_CUDA_ROOT, JITMM_SKIP_DEPS=1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# The quick start also installs the peer libraries jitmm-bench compares against (tests do not need them).
JITMM_WITH_PEERS=1
# shellcheck source=tools/deps.sh
source tools/deps.sh

build_dir=${JITMM_BUILD_DIR:-build}
jitmm_install_deps
jitmm_build "$build_dir" "$@"

echo
echo "== The probe: $build_dir/jitmm-info"
"$build_dir/jitmm-info"

shapes=bench/shapes/quickstart.csv
echo
echo "== A few JIT matmuls: $build_dir/jitmm-bench --shapes $shapes --check"
"$build_dir/jitmm-bench" --shapes "$shapes" --check
