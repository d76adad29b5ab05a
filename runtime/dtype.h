// Element types. f32 is the default; f64 serves gradient checks and references; f16/bf16 hold mixed-precision
// tensors (CUDA computes them in f32); i64 holds labels and counters; u8 holds images; b8 ("bool") holds
// masks (comparison results, where/masked_fill conditions): one byte per element, 0 or 1, stored as C++ bool.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace liftoff {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8, b8 };

size_t dtype_size(DType dtype);       // bytes per element
const char* dtype_name(DType dtype);  // "f32", "bf16", ..., "bool"
// Parses "f32", "float32", "bf16", ..., "bool"; throws ValueError naming the accepted spellings.
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
// bool is one byte on every platform Liftoff builds for; b8 storage is read and written as bool.
static_assert(sizeof(bool) == 1, "DType::b8 stores C++ bool: it must be one byte");
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::b8;
};

}  // namespace liftoff
