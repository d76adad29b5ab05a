// Device-side helpers shared by CUDA kernels: the storage types of each DType, conversions, launch sizes.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "runtime/dtype.h"
#include "runtime/error.h"

namespace liftoff::cuda {

template <class T>
struct IsHalfType : std::false_type {};
template <>
struct IsHalfType<__half> : std::true_type {};
template <>
struct IsHalfType<__nv_bfloat16> : std::true_type {};

// Converts between any two storage types, through float for the 16-bit ones. To bool: nonzero is true (NaN
// too), as a C++ conversion and PyTorch's .bool().
template <class To, class From>
__host__ __device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (IsHalfType<From>::value) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

// Calls fn(T{}) with the device storage type of dtype.
template <class Fn>
void dispatch_device_all(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    case DType::f16: fn(__half{}); return;
    case DType::bf16: fn(__nv_bfloat16{}); return;
    case DType::i32: fn(int32_t{}); return;
    case DType::i64: fn(int64_t{}); return;
    case DType::u8: fn(uint8_t{}); return;
    case DType::b8: fn(bool{}); return;
  }
}

// Calls fn(T{}) for the floating storage types a CUDA kernel supports (f32, f64, f16, bf16).
template <class Fn>
void dispatch_device_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    case DType::f16: fn(__half{}); return;
    case DType::bf16: fn(__nv_bfloat16{}); return;
    default:
      throw DTypeError(str_cat(op, ": dtype ", dtype_name(dtype), " is not supported on CUDA (f32, f64, f16, bf16)"));
  }
}

// Accumulation type of a storage type: float for the 16-bit types, the type itself otherwise.
template <class T>
struct AccType {
  using type = T;
};
template <>
struct AccType<__half> {
  using type = float;
};
template <>
struct AccType<__nv_bfloat16> {
  using type = float;
};
template <class T>
using acc_t = typename AccType<T>::type;

#define LIFTOFF_GRID_STRIDE_LOOP(i, n)                                                       \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

constexpr int kBlock = 256;
inline unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 16 ? 65535 * 16 : blocks));
}

}  // namespace liftoff::cuda
