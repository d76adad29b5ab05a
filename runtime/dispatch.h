// Dispatch helpers for op fronts: pick the kernel for a dtype and for a device.
#pragma once
#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/half.h"

namespace liftoff {

// Calls fn(T{}) with T = float or double; other dtypes throw DTypeError naming the op.
template <class Fn>
void dispatch_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    default:
      throw DTypeError(str_cat(op, ": dtype ", dtype_name(dtype), " is not supported on this path (f32, f64)"));
  }
}

// Calls fn(T{}) for the types host kernels compute directly: f32, f64, i32, i64, u8 and bool (b8); the
// 16-bit floats throw DTypeError naming the op (the CPU computes f32/f64).
template <class Fn>
void dispatch_numeric(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    case DType::i32: fn(int32_t{}); return;
    case DType::i64: fn(int64_t{}); return;
    case DType::u8: fn(uint8_t{}); return;
    case DType::b8: fn(bool{}); return;
    default:
      throw DTypeError(str_cat(op, ": dtype ", dtype_name(dtype),
                               " is not supported on the CPU (f32, f64, i32, i64, u8, bool)"));
  }
}

// Calls fn(T{}) for every storage type (host types for f16/bf16, bool for b8).
template <class Fn>
void dispatch_all(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    case DType::f16: fn(Half{}); return;
    case DType::bf16: fn(BFloat16{}); return;
    case DType::i32: fn(int32_t{}); return;
    case DType::i64: fn(int64_t{}); return;
    case DType::u8: fn(uint8_t{}); return;
    case DType::b8: fn(bool{}); return;
  }
}

}  // namespace liftoff

// Device dispatch in an op front: LIFTOFF_DISPATCH(x.device(), relu_forward, x, y) calls
// cuda::relu_forward(x, y) for CUDA tensors and cpu::relu_forward(x, y) otherwise. In a build without CUDA the
// CUDA branch throws (a CUDA tensor cannot exist there, so it is never reached). A program built against the
// installed package has the CUDA branch only when it asks for the `cuda` component (its own cuda:: kernels).
#if defined(LIFTOFF_WITH_CUDA) && LIFTOFF_WITH_CUDA
#define LIFTOFF_DISPATCH(device, fn, ...) ((device).is_cuda() ? cuda::fn(__VA_ARGS__) : cpu::fn(__VA_ARGS__))
#else
#define LIFTOFF_DISPATCH(device, fn, ...)                                                   \
  ((device).is_cuda() ? throw ::liftoff::DeviceError(#fn ": built without CUDA") \
                      : cpu::fn(__VA_ARGS__))
#endif
