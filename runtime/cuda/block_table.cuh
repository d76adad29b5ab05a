// Batched kernels over a table of tensors passed by value (weight_cast.cu, grad_cast.cu): tensor t owns the
// blocks [table.first_block[t], table.first_block[t + 1]) (no empty tensors, so the bounds increase
// strictly).
#pragma once
#include <cstdint>

namespace liftoff::cuda {

// The tensor whose blocks include this block: a binary search for the last first_block <= blockIdx.x.
// Inlined on the kernel's parameter: no copy of the table to local memory (ptxas reports no stack frame).
template <class Table>
__device__ __forceinline__ int tensor_of_block(const Table& table) {
  int lo = 0, hi = table.tensors - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.first_block[mid] <= blockIdx.x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace liftoff::cuda
