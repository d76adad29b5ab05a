// Index math for broadcasting elementwise kernels, callable from host code (tests) and CUDA kernels alike.
// An ElementwisePlan's output is seen as rows of its innermost (merged) dimension: a row's offset in each
// input comes from the outer dimensions (once per row or pack, not per element), and inside a row an input
// advances by its innermost stride (1: a contiguous run, 0: the same value, e.g. a per-channel bias along
// H*W). Divisions by the dimension sizes use multiply-high (FastDivider) when every index fits 31 bits.
#pragma once
#include <cstdint>
#include <type_traits>

#include "ops/common/elementwise.h"
#include "runtime/macros.h"

namespace liftoff {

// n / d and n % d for 0 <= n < 2^31 and 1 <= d < 2^31 without a hardware division: q = (mulhi(n, m) + n) >>
// s with s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1 (Granlund-Montgomery, as PyTorch's
// IntDivider).
struct FastDivider {
  uint32_t divisor = 1;
  uint32_t multiplier = 1;
  uint32_t shift = 0;

  FastDivider() = default;
  explicit FastDivider(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    const uint64_t excess = (uint64_t{1} << shift) - d;
    multiplier = static_cast<uint32_t>((excess << 32) / d + 1);
  }
  LIFTOFF_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier);
#else
    const uint32_t high = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier) >> 32);
#endif
    return (high + n) >> shift;
  }
};

// The same interface for 64-bit indices (tensors of 2^31 elements or more): a plain division.
struct PlainDivider {
  int64_t divisor = 1;
  PlainDivider() = default;
  explicit PlainDivider(int64_t d) : divisor(d) {}
  LIFTOFF_HD int64_t div(int64_t n) const { return n / divisor; }
};

template <class Index>
using Divider = std::conditional_t<sizeof(Index) == 4, FastDivider, PlainDivider>;

// How a kernel reads one input along a row.
enum class RowRead : uint8_t {
  broadcast,  // innermost stride 0 (or a constant): one value for the whole row
  vector,     // innermost stride 1 and every row start aligned to the pack: whole packs
  gather,     // anything else: element by element through the innermost stride
};

// Row-wise addressing of a plan with K inputs (slot k = the kernel's k-th argument, constants zero).
template <class Index, int K>
struct RowIndexer {
  static constexpr int kOuter = kElementwiseMaxDims - 1;
  int outer_dims = 0;
  Index inner = 1;  // elements per row (the plan's innermost size)
  Divider<Index> row_of;
  Divider<Index> outer_sizes[kOuter];          // innermost outer dimension first
  Index outer_strides[K > 0 ? K : 1][kOuter];  // same order
  Index inner_stride[K > 0 ? K : 1];
  RowRead read[K > 0 ? K : 1];

  // Each input's offset of the first element of `row`.
  LIFTOFF_HD void row_offsets(Index row, Index* offsets) const {
    for (int k = 0; k < K; ++k) offsets[k] = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int d = 0; d < kOuter; ++d) {
      if (d < outer_dims) {
        const Index next = outer_sizes[d].div(row);
        const Index index = row - next * static_cast<Index>(outer_sizes[d].divisor);
        for (int k = 0; k < K; ++k) offsets[k] += index * outer_strides[k][d];
        row = next;
      }
    }
  }

  // Each input's offset of output element i, and i's column in its row.
  LIFTOFF_HD Index element_offsets(Index i, Index* offsets) const {
    const Index row = row_of.div(i);
    const Index col = i - row * inner;
    row_offsets(row, offsets);
    for (int k = 0; k < K; ++k) offsets[k] += col * inner_stride[k];
    return col;
  }
};

// The indexer of a plan whose strides are slotted per argument (plan.strides[k] for argument k, zero rows
// for constants; `is_tensor[k]` false for a constant). Packs of `pack` elements: an input reads whole packs
// when its innermost stride is 1, its outer strides are multiples of the pack and `aligned[k]` (its pointer
// is aligned to a pack). Requires plan.dims >= 1.
template <class Index, int K>
RowIndexer<Index, K> make_row_indexer(const ElementwisePlan& plan, const bool* is_tensor, const bool* aligned,
                                      int pack) {
  RowIndexer<Index, K> ix;
  const int last = plan.dims - 1;
  ix.outer_dims = last;
  ix.inner = static_cast<Index>(plan.sizes[last]);
  ix.row_of = Divider<Index>(static_cast<Index>(plan.sizes[last]));
  for (int k = 0; k < K; ++k) {
    const int64_t inner_stride = is_tensor[k] ? plan.strides[k][last] : 0;
    ix.inner_stride[k] = static_cast<Index>(inner_stride);
    bool outer_packed = true;
    for (int j = 0; j < RowIndexer<Index, K>::kOuter; ++j) {
      const int d = last - 1 - j;  // innermost outer dimension first
      const int64_t stride = d >= 0 && is_tensor[k] ? plan.strides[k][d] : 0;
      ix.outer_strides[k][j] = static_cast<Index>(stride);
      outer_packed = outer_packed && stride % pack == 0;
    }
    if (inner_stride == 0) {
      ix.read[k] = RowRead::broadcast;
    } else if (inner_stride == 1 && outer_packed && aligned[k]) {
      ix.read[k] = RowRead::vector;
    } else {
      ix.read[k] = RowRead::gather;
    }
  }
  for (int j = 0; j < RowIndexer<Index, K>::kOuter; ++j) {
    const int d = last - 1 - j;
    ix.outer_sizes[j] = Divider<Index>(static_cast<Index>(d >= 0 ? plan.sizes[d] : 1));
  }
  return ix;
}

}  // namespace liftoff
