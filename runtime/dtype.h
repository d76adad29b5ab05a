// Element types. f32 is the default; f64 serves gradient checks and references; f16/bf16 hold mixed-precision
// tensors (CUDA computes them in f32); i64 holds labels and counters; u8 holds images.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace liftoff {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8 };

size_t dtype_size(DType dtype);       // bytes per element
const char* dtype_name(DType dtype);  // "f32", "bf16", ...
// Parses "f32", "float32", "bf16", ... ; throws ValueError naming the accepted spellings.
DType parse_dtype(const std::string& name);
bool is_floating(DType dtype);  // f32, f64, f16, bf16

// The DType of a C++ element type (DTypeOf<float>::value == DType::f32), for Tensor::data<T>() and
// from_vector.
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::u8;
};

}  // namespace liftoff
