#pragma once
// LIFTOFF_HD marks small helpers usable from host code and CUDA kernels alike.
#if defined(__CUDACC__)
#define LIFTOFF_HD __host__ __device__ __forceinline__
#else
#define LIFTOFF_HD inline
#endif
