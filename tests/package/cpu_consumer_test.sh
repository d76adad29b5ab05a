#!/usr/bin/env bash
# A CPU-only program on a machine without CUDA, NCCL or MPI, as far as its build can tell: install this build
# (CUDA-enabled or not) into a temporary prefix, then configure, build and run tests/package/cpu_consumer in an
# environment that hides the CUDA toolkit (PATH, LIBRARY_PATH, LD_LIBRARY_PATH, CUDA_HOME, CMAKE_PREFIX_PATH
# without it; CMake told to ignore its folders; the consumer's CMakeLists checks that find_package(CUDAToolkit)
# really fails). Then: neither the program nor libliftoff.so needs libcudart, libcublas, libcudnn, libnccl or
# libmpi (readelf NEEDED, ldd); the CPU result is right; `cuda` is refused with a reason, not a loader error;
# a CPU run maps none of those libraries; a missing MPI is refused with what to install.
#   cpu_consumer_test.sh <build dir> <source dir>
# Environment (tests/package/CMakeLists.txt): CMAKE, GENERATOR, MAKE_PROGRAM, CXX_COMPILER, CXX_LAUNCHER,
# WITH_MPI (1 when the build has the MPI process group).
set -uo pipefail
BUILD=$1
SOURCE=$2
CMAKE=${CMAKE:-cmake}
work=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../tools/check.sh"  # check <description> <command...>
show_log() {
  echo "---- $1"
  tail -n 40 "$1"
  echo "----"
}
vendor='libcudart|libcublas|libcudnn|libnccl|libmpi'
needs_no_vendor_library() {  # needs_no_vendor_library <elf file>
  ! readelf -d "$1" | grep -E "\(NEEDED\)" | grep -qE "$vendor"
}

if ! "$CMAKE" --install "$BUILD" --prefix "$work/prefix" >"$work/install.log" 2>&1; then
  show_log "$work/install.log"
  echo "FAIL cmake --install"
  exit 1
fi
library=$(find "$work/prefix" -name 'libliftoff.so*' -type f -print -quit)
check "libliftoff.so is installed" test -n "$library"
check "... and no static library" test -z "$(find "$work/prefix" -name 'libliftoff.a')"
check "libliftoff.so needs none of libcudart, libcublas, libcudnn, libnccl, libmpi" needs_no_vendor_library "$library"
check "... and has no RUNPATH into the CUDA toolkit" test -z "$(readelf -d "$library" | grep -E 'R(UN)?PATH')"

# The environment of a machine without CUDA: every CUDA folder out of the search paths, for the shell, the
# compiler driver, the dynamic loader and CMake.
cuda_dirs=(/usr/local/cuda)
for d in /usr/local/cuda-* /opt/cuda /opt/nvidia; do [ -e "$d" ] && cuda_dirs+=("$d"); done
without_cuda() {  # without_cuda <colon list>: the entries that are not in a CUDA folder
  local IFS=: out="" entry dir
  for entry in $1; do
    for dir in "${cuda_dirs[@]}"; do [[ "$entry" == "$dir"* ]] && continue 2; done
    out=${out:+$out:}$entry
  done
  echo "$out"
}
ignore_paths=""
for d in "${cuda_dirs[@]}"; do
  for sub in "" /bin /lib /lib64 /include /targets/x86_64-linux/lib /targets/x86_64-linux/include /nvvm/bin; do
    ignore_paths=${ignore_paths:+$ignore_paths;}$d$sub
  done
done
hidden_env=(env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT -u CUDAToolkit_ROOT -u CUDACXX -u NCCL_ROOT -u MPI_HOME
            -u CMAKE_PREFIX_PATH -u LIBRARY_PATH -u CPATH "PATH=$(without_cuda "$PATH")"
            "LD_LIBRARY_PATH=$(without_cuda "${LD_LIBRARY_PATH:-}")")
config=(-G "${GENERATOR:-Ninja}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix"
        -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "-DCMAKE_IGNORE_PREFIX_PATH=${cuda_dirs[*]}"
        "-DCMAKE_IGNORE_PATH=$ignore_paths" -DLIFTOFF_EXPECT_NO_CUDA_TOOLKIT=ON
        -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Wundef -Werror")
config[4]="-DCMAKE_IGNORE_PREFIX_PATH=$(IFS=';'; echo "${cuda_dirs[*]}")"
[ -n "${MAKE_PROGRAM:-}" ] && config+=(-DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM")
[ -n "${CXX_COMPILER:-}" ] && config+=(-DCMAKE_CXX_COMPILER="$CXX_COMPILER")
[ -n "${CXX_LAUNCHER:-}" ] && config+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CXX_LAUNCHER")
consumer=$work/consumer
if ! "${hidden_env[@]}" "$CMAKE" -S "$SOURCE/tests/package/cpu_consumer" -B "$consumer" "${config[@]}" \
    >"$work/configure.log" 2>&1; then
  show_log "$work/configure.log"
  echo "FAIL the CPU consumer configures against the package with CUDA hidden"
  exit 1
fi
echo "ok   the CPU consumer configures against the package with CUDA hidden (find_package(CUDAToolkit) fails)"
if ! "${hidden_env[@]}" "$CMAKE" --build "$consumer" -j 2 >"$work/build.log" 2>&1; then
  show_log "$work/build.log"
  echo "FAIL the CPU consumer builds (-Werror) and links with CUDA hidden"
  exit 1
fi
echo "ok   the CPU consumer builds (-Werror, -Wundef) and links with CUDA hidden"
cuda_mentions=$(grep -rlF --include=build.ninja --include='*.rsp' -e /usr/local/cuda "$consumer")
check "... no compile or link line names a CUDA folder${cuda_mentions:+ ($cuda_mentions)}" test -z "$cuda_mentions"
program=$consumer/cpu_consumer
check "the consumer needs none of libcudart, libcublas, libcudnn, libnccl, libmpi" needs_no_vendor_library "$program"
"${hidden_env[@]}" ldd "$program" >"$work/ldd.log" 2>&1
check "ldd: every library of the consumer is found" test -z "$(grep 'not found' "$work/ldd.log")"
check "ldd: no CUDA, NCCL or MPI library is loaded with it" test -z "$(grep -E "$vendor" "$work/ldd.log")"

"${hidden_env[@]}" "$program" >"$work/run.log" 2>&1
status=$?
cat "$work/run.log"
check "the consumer runs (exit 0)" test $status -eq 0
check "... computes on the CPU: sum(a @ b) = 134, grad a = 11 15 11 15" \
  grep -qx "cpu: sum(a @ b) = 134, grad a = 11 15 11 15" "$work/run.log"
check "... and says whether CUDA is usable, with the reason when not" \
  grep -qE "^cuda: (usable|not available: .+)$" "$work/run.log"
if grep -q "^cuda: not available" "$work/run.log"; then
  check "... then refuses --device cuda with that reason (a liftoff::Error, not a loader error)" \
    grep -qE "^cuda: refused: .+" "$work/run.log"
fi
check "... a CPU run maps no CUDA, NCCL or MPI library" grep -qx "mapped vendor libraries:" "$work/run.log"

if [ "${WITH_MPI:-0}" = 1 ]; then
  "${hidden_env[@]}" LIFTOFF_MPI_LIBRARY=/nonexistent/libmpi.so.40 "$program" --mpi >"$work/mpi.log" 2>&1
  status=$?
  grep "^mpi:" "$work/mpi.log"
  check "without MPI, the mpi process group is refused with what to install (exit 0: caught)" \
    test $status -eq 0 -a -n "$(grep -E '^mpi: refused: mpi process group: MPI .*could not be loaded.*install Open MPI' "$work/mpi.log")"
fi

[ $fail -eq 0 ] && echo "package: all checks passed"
exit $fail
