#include "ops/common/elementwise.h"

namespace liftoff {

MemoryFormat elementwise_format(const Shape& out_shape, const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) {
    if (t.defined() && t.shape() == out_shape)
      return t.is_cuda() ? t.memory_format() : MemoryFormat::contiguous;
  }
  return MemoryFormat::contiguous;
}

ElementwisePlan make_elementwise_plan(const char* op, const Shape& out_shape, MemoryFormat format,
                                      const std::vector<Tensor>& inputs) {
  const int rank = static_cast<int>(out_shape.size());
  LIFTOFF_CHECK(rank <= kElementwiseMaxDims, ShapeError, op, ": output shape ", shape_str(out_shape), " has ",
                rank, " dimensions; at most ", kElementwiseMaxDims, " are supported (reshape to fewer)");
  ElementwisePlan plan;
  plan.numel = shape_numel(out_shape);
  // Dimensions in the output's memory order, outermost first.
  std::vector<int> order(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) order[static_cast<size_t>(d)] = d;
  if (format == MemoryFormat::channels_last && rank == 4) order = {0, 2, 3, 1};

  std::vector<std::vector<int64_t>> strides;  // per input, aligned to out_shape (broadcast dims 0)
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    LIFTOFF_CHECK(plan.inputs < kElementwiseMaxInputs, ValueError, op, ": too many tensor inputs");
    std::vector<int64_t> aligned(static_cast<size_t>(rank), 0);
    const int lead = rank - static_cast<int>(t.dim());
    for (int d = lead; d < rank; ++d) {
      const size_t td = static_cast<size_t>(d - lead);
      if (t.shape()[td] != 1) aligned[static_cast<size_t>(d)] = t.strides()[td];
    }
    strides.push_back(std::move(aligned));
    ++plan.inputs;
  }
  // Merge from the innermost dimension outwards; size-1 dimensions vanish.
  std::vector<int64_t> sizes;                                // innermost first while building
  std::vector<std::vector<int64_t>> merged(strides.size());  // same order
  for (int k = rank - 1; k >= 0; --k) {
    const size_t d = static_cast<size_t>(order[static_cast<size_t>(k)]);
    const int64_t size = out_shape[d];
    if (size == 1) continue;
    bool mergeable = !sizes.empty();
    for (size_t i = 0; mergeable && i < strides.size(); ++i) {
      mergeable = strides[i][d] == merged[i].back() * sizes.back();
    }
    if (mergeable) {
      sizes.back() *= size;
      continue;
    }
    sizes.push_back(size);
    for (size_t i = 0; i < strides.size(); ++i) merged[i].push_back(strides[i][d]);
  }
  plan.dims = static_cast<int>(sizes.size());
  for (int j = 0; j < plan.dims; ++j) {
    const size_t src = sizes.size() - 1 - static_cast<size_t>(j);  // back to outermost first
    plan.sizes[j] = sizes[src];
    for (size_t i = 0; i < merged.size(); ++i) plan.strides[i][j] = merged[i][src];
  }
  plan.dense = plan.dims == 0;
  if (plan.dims == 1) {
    plan.dense = true;
    for (int i = 0; i < plan.inputs; ++i) plan.dense = plan.dense && plan.strides[i][0] == 1;
  }
  return plan;
}

}  // namespace liftoff
