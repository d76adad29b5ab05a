#include "runtime/dtype.h"

#include "runtime/error.h"

namespace liftoff {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::b8: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::b8: return "bool";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  if (name == "f32" || name == "float32" || name == "float") return DType::f32;
  if (name == "f64" || name == "float64" || name == "double") return DType::f64;
  if (name == "f16" || name == "float16" || name == "half" || name == "fp16") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "i64" || name == "int64") return DType::i64;
  if (name == "u8" || name == "uint8") return DType::u8;
  if (name == "bool" || name == "b8") return DType::b8;
  throw ValueError("unknown dtype '" + name + "'; expected one of f32, f64, f16, bf16, i32, i64, u8, bool");
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

}  // namespace liftoff
