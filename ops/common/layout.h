// The memory layout an op computes in. CUDA kernels of the layout-preserving ops (conv2d,
// batch_norm2d[_relu], relu, add, cast, global_avg_pool2d) handle channels-last (NHWC) tensors directly, so a
// channels-last CUDA input keeps its layout through them; every CPU kernel is NCHW (the CPU stays the simple
// reference), so CPU inputs are made contiguous. An op given inputs of mixed layouts converts them to the
// first input's.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {

inline MemoryFormat op_memory_format(const Tensor& x) {
  return x.is_cuda() ? x.memory_format() : MemoryFormat::contiguous;
}

}  // namespace liftoff
