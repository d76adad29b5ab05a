// The iteration space of a broadcasting elementwise op, shared by the CPU loops (elementwise_cpu.h) and the
// CUDA kernels (elementwise.cuh). The output is written densely in its memory format (element i of the plan
// is element i of the output's storage); each input is read through its own strides, 0 along broadcast
// dimensions, so broadcast and non-contiguous inputs need no copy. Dimensions are reordered into the output's
// memory order (channels-last outputs iterate N, H, W, C) and adjacent dimensions that every operand walks
// contiguously are merged: same-shape dense inputs collapse to one dimension of stride 1 (the vectorised
// path).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

constexpr int kElementwiseMaxDims = 8;
constexpr int kElementwiseMaxInputs = 4;

struct ElementwisePlan {
  int dims = 0;    // after merging; 0 for a single element
  int inputs = 0;  // tensor inputs described by strides (constants have none)
  int64_t numel = 0;
  int64_t sizes[kElementwiseMaxDims] = {};                           // outermost first
  int64_t strides[kElementwiseMaxInputs][kElementwiseMaxDims] = {};  // elements; 0 where broadcast
  // Every input walks its memory with stride 1 in the output's order (one merged dimension, or none): the
  // kernels index inputs like the output.
  bool dense = false;
};

// An operand of an elementwise op: a tensor, or (tensor undefined) the constant `value`.
struct ElementOperand {
  Tensor tensor;
  double value = 0.0;
};

// The layout an elementwise result takes: on CUDA the memory format of the first tensor input that has the
// output's full shape (a channels-last activation stays channels-last), contiguous otherwise.
MemoryFormat elementwise_format(const Shape& out_shape, const std::vector<Tensor>& inputs);

// The plan for writing a dense `out_shape` tensor in `format` from `inputs` (each broadcastable to
// out_shape; undefined entries are scalar constants and are skipped, so plan.strides[k] belongs to the k-th
// defined input). ShapeError naming `op` beyond kElementwiseMaxDims dimensions.
ElementwisePlan make_elementwise_plan(const char* op, const Shape& out_shape, MemoryFormat format,
                                      const std::vector<Tensor>& inputs);

}  // namespace liftoff
