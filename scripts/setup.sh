#!/usr/bin/env bash
# Liftoff set-up: installs what is missing (Debian packages), builds, then runs the main job or the tests.
#   scripts/setup.sh train [train flags...]   build, then train on Fashion-MNIST (defaults below)
#   scripts/setup.sh test                     build the CUDA-enabled and the CPU-only configuration, run the tests
#   scripts/setup.sh build                    install and build only
# Environment: LIFTOFF_BUILD_DIR (default build), LIFTOFF_CUDA (AUTO|ON|OFF), CMAKE_CUDA_ARCHITECTURES, JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build g++ ccache pkg-config libeigen3-dev libstb-dev zlib1g-dev libgtest-dev libcli11-dev
          nlohmann-json3-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist libturbojpeg0-dev
          python3-protobuf python3-crcmod)  # the last two: tests read TensorBoard files back

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

configure_and_build() {  # $1 build dir, $2 LIFTOFF_CUDA value
  local dir=$1 cuda=$2
  local args=(-S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIFTOFF_CUDA="$cuda" -DLIFTOFF_WERROR=ON)
  command -v ccache >/dev/null && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  [ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")
  cmake "${args[@]}" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  grep -E "^-- Liftoff:" "$dir.configure.log" || true
  cmake --build "$dir" -j "${JOBS:-$(nproc)}"
}

mode=${1:-build}
[ $# -gt 0 ] && shift
install_missing
case "$mode" in
  build)
    configure_and_build "${LIFTOFF_BUILD_DIR:-build}" "${LIFTOFF_CUDA:-AUTO}"
    ;;
  train)
    dir=${LIFTOFF_BUILD_DIR:-build}
    configure_and_build "$dir" "${LIFTOFF_CUDA:-AUTO}"
    if [ $# -eq 0 ]; then set -- --model resnet20 --epochs 3 --batch 128; fi
    exec "$dir/bin/train" --data fashion-mnist "$@"
    ;;
  test)
    # The CUDA-enabled build (GPU tests skip with the reason on a machine without a GPU), then the CPU-only one.
    status=0
    configure_and_build build "${LIFTOFF_CUDA:-AUTO}"
    (cd build && ctest --output-on-failure -LE slow -j "${JOBS:-$(nproc)}") || status=1
    configure_and_build build-cpu OFF
    (cd build-cpu && ctest --output-on-failure -LE slow -j "${JOBS:-$(nproc)}") || status=1
    exit $status
    ;;
  *)
    echo "usage: scripts/setup.sh build | train [train flags...] | test" >&2
    exit 2
    ;;
esac
