// Dispatch on the dtype of an index tensor (class targets, embedding indices): i64 or i32, as PyTorch accepts
// for embedding (nll_loss here accepts both too).
#pragma once
#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/error.h"

namespace liftoff {

inline bool is_index_dtype(DType dtype) {
  return dtype == DType::i64 || dtype == DType::i32;
}

// Calls fn(I{}) with I = int64_t or int32_t; another dtype throws DTypeError naming op.
template <class Fn>
void dispatch_index(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::i64:
      fn(int64_t{});
      return;
    case DType::i32:
      fn(int32_t{});
      return;
    default:
      throw DTypeError(str_cat(op, ": index dtype ", dtype_name(dtype), " is not supported (i64, i32)"));
  }
}

}  // namespace liftoff
