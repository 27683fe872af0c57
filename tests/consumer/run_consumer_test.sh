#!/usr/bin/env bash
# Install a built jitmm into a temporary prefix, then build and run a C consumer against it twice:
# through CMake (find_package(jitmm), jitmm::jitmm) and through pkg-config (jitmm.pc). No network.
# Usage: run_consumer_test.sh BUILD_DIR WORK_DIR [CMAKE_COMMAND [GENERATOR [C_COMPILER]]]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${1:?usage: run_consumer_test.sh BUILD_DIR WORK_DIR [CMAKE [GENERATOR [CC]]]}
work=${2:?usage: run_consumer_test.sh BUILD_DIR WORK_DIR [CMAKE [GENERATOR [CC]]]}
cmake=${3:-cmake}
generator=${4:-}
cc=${5:-${CC:-cc}}
if [[ -z "$generator" ]] && command -v ninja >/dev/null 2>&1; then generator=Ninja; fi

rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
export JITMM_CACHE_DIR="$work/cache"

echo "== install $build_dir -> $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
lib=$(find "$prefix" -name 'libjitmm.so' -print -quit)
pc=$(find "$prefix" -name 'jitmm.pc' -print -quit)
[[ -n "$lib" ]] || { echo "FAIL: no libjitmm.so under $prefix"; exit 1; }
[[ -n "$pc" ]] || { echo "FAIL: no jitmm.pc under $prefix"; exit 1; }
[[ -f "$prefix/include/jitmm/jitmm.h" ]] || { echo "FAIL: no include/jitmm/jitmm.h under $prefix"; exit 1; }
LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

echo "== CMake consumer: find_package(jitmm) with CMAKE_PREFIX_PATH=$prefix"
gen_args=()
[[ -n "$generator" ]] && gen_args=(-G "$generator")
"$cmake" -S "$here" -B "$work/cmake-build" "${gen_args[@]}" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" \
  || { cat "$work/cmake.log"; exit 1; }
"$cmake" --build "$work/cmake-build"
"$work/cmake-build/app"

echo "== pkg-config consumer: PKG_CONFIG_PATH=$(dirname "$pc")"
PKG_CONFIG_PATH="$(dirname "$pc")"
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs jitmm)
echo "pkg-config --cflags --libs jitmm: $flags"
# shellcheck disable=SC2086 # the flags are words
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$here/consumer.c" -o "$work/app-pc" $flags -lm
"$work/app-pc"
echo "install_consumer: OK"
