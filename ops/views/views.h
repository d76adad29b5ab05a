// Views as free functions, with PyTorch's names and semantics (torch.<name>): each returns a tensor sharing
// x's storage (no copy, any dtype, any device) and records its backward, so several views of one base
// accumulate their gradients into it correctly. Negative dims count from the end; bad dims or sizes throw
// ShapeError naming the op and the shapes. Views are written through by in-place raw writes (fill_, copy_).
// (view/reshape/flatten(x, start_dim) are in ops/reshape; Tensor::slice/select/permute are the methods these
// wrap.)
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

constexpr int64_t kSliceEnd = std::numeric_limits<int64_t>::max();

// x[start:end:step] along dim (torch.slice / Python slicing): negative start/end count from the end, then
// both are clamped to [0, size] (an empty range gives size 0, never an error); step >= 1 (ValueError
// otherwise, as PyTorch). Backward: the gradient lands in a zero tensor of x's shape at the sliced positions.
Tensor slice(const Tensor& x, int64_t dim, int64_t start = 0, int64_t end = kSliceEnd, int64_t step = 1);
// x.narrow(dim, start, length) = slice(x, dim, start, start + length) with start in [-size, size] and the
// range inside the dimension (ShapeError otherwise).
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// x.select(dim, index), removing dim; index in [-size, size) (negative counts from the end).
Tensor select(const Tensor& x, int64_t dim, int64_t index);

// x.permute(dims); transpose swaps two dims; movedim moves source dims to destination positions keeping the
// order of the others (torch.movedim). Backward: the inverse permutation.
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);
Tensor movedim(const Tensor& x, const std::vector<int64_t>& source, const std::vector<int64_t>& destination);

// squeeze removes size-1 dims (all of them, or the given ones: a given dim of another size is left alone, as
// in PyTorch); unsqueeze inserts a size-1 dim at dim in [-(n+1), n]. Backward: reshape to x's shape.
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& dims);
Tensor unsqueeze(const Tensor& x, int64_t dim);

// torch.flatten(x, start_dim, end_dim): dims start..end (inclusive) become one. A view when those dims are
// laid out as one strided run (always for a contiguous x), else a copy (as torch.flatten/reshape). A 0-d x
// gives [1]. Note: the one-argument flatten(x, start_dim = 1) of ops/reshape keeps nn.Flatten's default.
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim);
// torch.unflatten(x, dim, sizes): dim becomes `sizes` (one -1 is inferred); always a view.
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);

// x.expand(sizes): size-1 dims (and new leading dims) repeat without copying (stride 0); -1 keeps a size (not
// for new leading dims). broadcast_to(x, shape) is the same with PyTorch's name. Backward: sum_to_size. The
// result is read-only in spirit: writing into it writes the shared element (as in PyTorch, don't).
Tensor expand(const Tensor& x, const Shape& sizes);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// x.sum_to_size(shape): sums x over the dims that broadcasting `shape` to x's shape would expand (x's shape
// must be a broadcast of `shape`, else ShapeError). Floating dtypes (f32/f64 on the CPU, also f16/bf16 on
// CUDA, accumulated in f32), deterministic (fixed order, no atomics). A copy; returns x itself when the
// shapes match. Backward: expand.
Tensor sum_to_size(const Tensor& x, const Shape& shape);

}  // namespace liftoff
