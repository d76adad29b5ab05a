#!/usr/bin/env bash
# Embedding Liftoff the way a user does: install this build tree into a temporary prefix, move the prefix
# (the package must be relocatable), then configure, build (warnings are errors) and run each example of
# examples/ on its own against it with find_package(Liftoff).
#   embedding_test.sh <build dir> <source dir>
# Environment (set by tests/embedding/CMakeLists.txt): CMAKE (cmake binary), GENERATOR, MAKE_PROGRAM,
# CXX_COMPILER, CXX_LAUNCHER, CUDA_COMPILER and CUDA_LAUNCHER (empty in a build without CUDA), DATA_DIR (the
# Fashion-MNIST files; generated data when they are missing).
set -uo pipefail
BUILD=$1
SOURCE=$2
CMAKE=${CMAKE:-cmake}
DATA_DIR=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../tools/check.sh"  # check <description> <command...>
show_log() {  # the end of a log, after a failure
  echo "---- $1"
  tail -n 40 "$1"
  echo "----"
}
mentions() {  # mentions <file or folder> <fixed string>: found in a build.ninja / flags.make below it
  grep -rqF --include=build.ninja --include=flags.make -- "$2" "$1"
}
has_report() {  # the utilization report of <n> measured steps, with its verdict, in <log>
  grep -q "Utilization report: $2 steps measured" "$1" && grep -q "verdict:" "$1"
}
above() {  # above <a> <b>: a > b, as numbers
  awk -v a="$1" -v b="$2" 'BEGIN {exit !(a + 0 > b + 0)}'
}
fell() {  # fell <first> <last>: the last loss is below 3/4 of the first
  awk -v a="$1" -v b="$2" 'BEGIN {exit !(a + 0 > 0 && b + 0 > 0 && b + 0 < 0.75 * a)}'
}

# 1. Install, then move the prefix: nothing may point back into the build or source tree.
if ! "$CMAKE" --install "$BUILD" --prefix "$work/staged" >"$work/install.log" 2>&1; then
  show_log "$work/install.log"
  echo "FAIL cmake --install"
  exit 1
fi
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
include=$prefix/include/liftoff
package=$(dirname "$(find "$prefix" -name LiftoffConfig.cmake -print -quit)")
check "the package config and its version file are installed" \
  test -f "$package/LiftoffConfig.cmake" -a -f "$package/LiftoffConfigVersion.cmake"
check "the library is installed (shared)" test -n "$(find "$prefix" -name libliftoff.so)"
check "the umbrella header and the API headers are installed" \
  test -f "$include/liftoff.h" -a -f "$include/runtime/tensor.h" -a -f "$include/runtime/gradcheck.h"
check "no installed CMake file names the build or source tree" \
  test -z "$(grep -rlF -e "$BUILD" -e "$SOURCE/" "$package")"
internal=$(cd "$include" && find . \( -name kernels.h -o -name '*.cuh' -o -path ./ops/common \) -print)
check "internal headers (kernels.h, *.cuh, ops/common) stay out${internal:+: $internal}" test -z "$internal"
# Every quoted include of an installed header must be installed too (angle-bracket ones are dependencies).
missing=$(cd "$include" && grep -rhoE '^#include "[^"]+"' --include='*.h' . | sed -E 's/#include "(.*)"/\1/' |
  sort -u | while read -r h; do [ -f "$h" ] || echo "$h"; done)
check "installed headers include only installed headers${missing:+ (missing: $missing)}" test -z "$missing"

# 2. Each example on its own, warnings as errors.
config=(-G "${GENERATOR:-Ninja}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
        -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror")
[ -n "${MAKE_PROGRAM:-}" ] && config+=(-DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM")
[ -n "${CXX_COMPILER:-}" ] && config+=(-DCMAKE_CXX_COMPILER="$CXX_COMPILER")
[ -n "${CXX_LAUNCHER:-}" ] && config+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CXX_LAUNCHER")
if [ -n "${CUDA_COMPILER:-}" ]; then
  config+=(-DCMAKE_CUDA_COMPILER="$CUDA_COMPILER"
           "-DCMAKE_CUDA_FLAGS=-Werror=all-warnings -Xcompiler=-Wall,-Wextra")
  [ -n "${CUDA_LAUNCHER:-}" ] && config+=(-DCMAKE_CUDA_COMPILER_LAUNCHER="$CUDA_LAUNCHER")
fi
built=0
for example in custom_model custom_op training_loop se_block; do
  dir=$work/$example
  if ! "$CMAKE" -S "$SOURCE/examples/$example" -B "$dir" "${config[@]}" >"$work/$example.cmake.log" 2>&1; then
    show_log "$work/$example.cmake.log"
    check "$example configures against the installed package" false
    continue
  fi
  if ! "$CMAKE" --build "$dir" -j 2 >"$work/$example.build.log" 2>&1; then
    show_log "$work/$example.build.log"
    check "$example builds with -Werror" false
    continue
  fi
  check "$example builds with -Werror against the installed headers" mentions "$dir" "$include"
  check "... and not against the source tree" test -z "$(grep -rlF --include=build.ninja --include=flags.make \
    -- "-I$SOURCE" "$dir")"
  built=$((built + 1))
done
[ $built -eq 4 ] || { echo "FAIL not every example built"; exit 1; }

# 3. Run them briefly.
"$work/custom_op/custom_op" >"$work/custom_op.log" 2>&1
status=$?
cat "$work/custom_op.log"
check "custom_op: gradcheck and every other check pass" test $status -eq 0
check "... gradcheck ran" grep -q "^ok   gradcheck" "$work/custom_op.log"

data=(--data-dir "$DATA_DIR")
if [ ! -f "$DATA_DIR/train-images-idx3-ubyte.gz" ]; then
  echo "note: Fashion-MNIST not found in $DATA_DIR (Debian: dataset-fashion-mnist); using generated data"
  data=(--synthetic)
fi
"$work/custom_model/custom_model" "${data[@]}" --steps 200 --threads 2 --device cpu >"$work/custom_model.log" 2>&1
status=$?
cat "$work/custom_model.log"
check "custom_model runs" test $status -eq 0
first=$(awk '/^step/ {print $4; exit}' "$work/custom_model.log")
last=$(awk '/^step/ {v = $4} END {print v}' "$work/custom_model.log")
accuracy=$(awk '/^test accuracy/ {sub("%", "", $3); print $3}' "$work/custom_model.log")
check "custom_model: the loss falls (${first:-?} -> ${last:-?})" fell "${first:-0}" "${last:-0}"
check "custom_model: test accuracy ${accuracy:-?}% is far above chance (10%)" above "${accuracy:-0}" 60

"$work/training_loop/training_loop" "${data[@]}" --device cpu --steps 12 --batch 16 --accum 3 --workers 1 \
  --threads 2 >"$work/training_loop.log" 2>&1
status=$?
cat "$work/training_loop.log"
check "training_loop runs" test $status -eq 0
check "... prints the loss" grep -q "^step   10  loss [0-9]" "$work/training_loop.log"
check "... and the utilization report with its verdict" has_report "$work/training_loop.log" 7
"$work/training_loop/training_loop" --device cpu --amp bf16 --steps 1 >"$work/amp_cpu.log" 2>&1
status=$?
check "training_loop: --amp on the CPU is a usage error (exit 2)" test $status -eq 2
check "... that says why" grep -q "needs a CUDA device" "$work/amp_cpu.log"

"$work/se_block/se_block" "${data[@]}" --device cpu --steps 20 --batch 32 --threads 2 >"$work/se_block.log" 2>&1
status=$?
cat "$work/se_block.log"
check "se_block runs (SE block, custom loss, Trainer)" test $status -eq 0
check "... prints the loss" grep -q "^step   20  loss [0-9]" "$work/se_block.log"
check "... and the test accuracy" grep -q "^test accuracy" "$work/se_block.log"

[ $fail -eq 0 ] && echo "embedding: all checks passed"
exit $fail
