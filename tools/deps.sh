# shellcheck shell=bash
# Dependencies and the build step of jitmm, in one place: sourced by tools/quickstart.sh and tools/test.sh.
#
#   jitmm_install_deps                      install the Debian packages that are missing (apt-get)
#   jitmm_build BUILD_DIR [cmake args...]   configure (Ninja) and build; fails clearly when cuda.h is missing
#
# Environment: JITMM_SKIP_DEPS=1 skips the package step (a machine without a package registry, where the
# packages come another way, e.g. the GPU machine's .devdeps); JITMM_CUDA_ROOT names the CUDA toolkit.

# Debian package names.
JITMM_DEPS=(build-essential cmake ninja-build pkg-config libxbyak-dev libcpuinfo-dev catch2)
# Peer libraries for jitmm-bench --peer (optional: everything builds without them). The quick start installs
# them; tools/test.sh installs only what the tests need.
JITMM_PEER_DEPS=(libdnnl-dev libopenblas-dev libxsmm-dev)
if [[ "${JITMM_WITH_PEERS:-0}" == 1 ]]; then JITMM_DEPS+=("${JITMM_PEER_DEPS[@]}"); fi

jitmm_log() { printf '[jitmm] %s\n' "$*" >&2; }

jitmm_install_deps() {
  if [[ "${JITMM_SKIP_DEPS:-0}" == 1 ]]; then
    jitmm_log "JITMM_SKIP_DEPS=1: not checking packages"
    return 0
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    jitmm_log "not a Debian system (no dpkg-query): install these yourself: ${JITMM_DEPS[*]}"
    return 0
  fi
  local pkg missing=()
  for pkg in "${JITMM_DEPS[@]}"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]]; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    jitmm_log "packages: all present"
    return 0
  fi
  local sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      jitmm_log "missing packages: ${missing[*]}"
      jitmm_log "not root and no sudo: run as root: apt-get update && apt-get install -y ${missing[*]}"
      return 1
    fi
  fi
  jitmm_log "installing: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# cuda.h (and nvrtc.h) are needed at build time only; libcuda and libnvrtc are loaded at run time if present.
# $1: the build folder (a configured one already knows where CUDA is); the rest: the cmake arguments to be used.
jitmm_check_cuda_headers() {
  local build_dir=$1 arg root=""
  shift
  for arg in "$@"; do
    [[ "$arg" == -DJITMM_CUDA_ROOT=* ]] && root=${arg#-DJITMM_CUDA_ROOT=}
  done
  if [[ -n "$root" ]]; then
    [[ -f "$root/include/cuda.h" ]] && return 0
    jitmm_log "error: $root/include/cuda.h not found (-DJITMM_CUDA_ROOT=$root): jitmm needs the CUDA headers"
    return 1
  fi
  if [[ -f "$build_dir/CMakeCache.txt" ]] && grep -q '^CUDA_DRIVER_INCLUDE_DIR:PATH=/' "$build_dir/CMakeCache.txt"; then
    return 0
  fi
  local dir
  for dir in /usr/local/cuda/include "${CUDA_HOME:+$CUDA_HOME/include}" /usr/include; do
    [[ -n "$dir" && -f "$dir/cuda.h" ]] && return 0
  done
  jitmm_log "error: the CUDA toolkit headers were not found (no /usr/local/cuda/include/cuda.h)."
  jitmm_log "jitmm needs cuda.h and nvrtc.h at build time only (no GPU, no libcuda). Point at a toolkit with"
  jitmm_log "  JITMM_CUDA_ROOT=/path/to/cuda $0   (passed on as -DJITMM_CUDA_ROOT=/path/to/cuda)"
  return 1
}

# Configure (Ninja for a fresh folder; a configured one keeps its generator) and build.
# $1: the build folder; the rest: extra cmake arguments. JITMM_CUDA_ROOT becomes -DJITMM_CUDA_ROOT.
jitmm_build() {
  local build_dir=$1
  shift
  local args=()
  [[ -f "$build_dir/CMakeCache.txt" ]] || args+=(-G Ninja)
  [[ -n "${JITMM_CUDA_ROOT:-}" ]] && args+=("-DJITMM_CUDA_ROOT=$JITMM_CUDA_ROOT")
  args+=("$@")
  jitmm_check_cuda_headers "$build_dir" "${args[@]}"
  jitmm_log "configuring $build_dir"
  cmake -S . -B "$build_dir" "${args[@]}"
  jitmm_log "building $build_dir"
  cmake --build "$build_dir"
}
