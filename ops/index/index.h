#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {

// Indexing along one dim, with PyTorch's names, argument order and shape rules. Index tensors are i64 (i32 is
// also accepted by index_select) on x's device and never require grad; indices must be in [0, size of dim)
// (no negative indices, as PyTorch's gather/scatter). x may be any dtype (f16/bf16 too on both devices) with
// any strides; results are contiguous. Negative dims count from the end; 0-d tensors act as [1].
//
// Out-of-range indices: on the CPU, a ValueError naming the index, its position and the shapes, before any
// work. On CUDA the values cannot be read without a host sync, so the kernel traps (prints the bad index and
// the bound, like PyTorch's device assert): the CUDA context is then unusable and the next CUDA call throws.
//
// Determinism: forwards and CPU backwards are deterministic. Accumulations on CUDA (scatter_add, and the
// backward of gather and index_select) use atomicAdd for f32/f64 by default (fast, bitwise non-deterministic
// when indices repeat, as PyTorch); with set_deterministic_algorithms(true) (runtime/determinism.h) and
// always for f16/bf16 (f32 accumulation) and u8 they use a deterministic owner-computes kernel instead (each
// output element sums its matches in index order; cost O(output elements x index size along dim)). Integer
// atomics are exact.

// torch.index_select(x, dim, index): x's entries at index (1-D, or 0-d as one entry) along dim; the result
// has x's shape with size index.numel() at dim. Backward: gx[..., index[k], ...] += gy[..., k, ...].
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// torch.gather(x, dim, index): out[p] = x[p with its dim coordinate replaced by index[p]]; index has x's
// rank, index.size(d) <= x.size(d) for d != dim; the result has index's shape. Backward: scatter_add of gy
// into zeros at index.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// torch.scatter_add(x, dim, index, src) (out of place): a copy of x with src[p] added at p's position with
// the dim coordinate replaced by index[p], for every p in index's shape; index, x and src share a rank,
// index.size(d) <= src.size(d) for every d and <= x.size(d) for d != dim; src has x's dtype (all dtypes but
// bool). Backward: gx = gy, gsrc = gather(gy, dim, index) (zero outside index's shape).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace liftoff
