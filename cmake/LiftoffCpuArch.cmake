# CPU instruction set for the host code (Eigen's GEMM and our loops gain ~1.7x from AVX2+FMA over baseline
# x86-64; measured in docs/perf.md). AUTO uses x86-64-v3 when the configuring machine supports AVX2 and FMA.
# Every C++ file gets the same flag: Eigen objects built with different vector widths must not meet.
set(LIFTOFF_CPU_ARCH AUTO CACHE STRING "Host -march: AUTO, native, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, or NONE")
if(LIFTOFF_CPU_ARCH STREQUAL "AUTO")
  set(_arch NONE)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    include(CheckCXXSourceRuns)
    set(CMAKE_REQUIRED_FLAGS "-march=x86-64-v3")
    check_cxx_source_runs("
      int main() {
        __builtin_cpu_init();
        return __builtin_cpu_supports(\"avx2\") && __builtin_cpu_supports(\"fma\") ? 0 : 1;
      }" LIFTOFF_HOST_HAS_AVX2_FMA)
    unset(CMAKE_REQUIRED_FLAGS)
    if(LIFTOFF_HOST_HAS_AVX2_FMA)
      set(_arch x86-64-v3)
    endif()
  endif()
else()
  set(_arch ${LIFTOFF_CPU_ARCH})
endif()
if(NOT _arch STREQUAL "NONE")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=${_arch}>)
endif()
set(LIFTOFF_EFFECTIVE_CPU_ARCH ${_arch})
