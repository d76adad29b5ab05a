// Strided addressing shared by the CPU and CUDA kernels of the shape/indexing ops (cat, index, pad, flip,
// repeat, views): a tensor's sizes and element strides in a fixed-size struct that a kernel takes by value,
// and the offset of the element at a row-major linear index. The same inline code runs on host and device,
// so a CPU kernel and its CUDA twin address elements identically.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

#if defined(__CUDACC__)
#define LIFTOFF_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LIFTOFF_HOST_DEVICE inline
#endif

namespace liftoff {

constexpr int kMaxStridedDims = 8;

struct Strided {
  int dims = 0;
  int64_t shape[kMaxStridedDims] = {};
  int64_t strides[kMaxStridedDims] = {};
};

// The layout of t, or of `shape` with `strides` (ShapeError naming `op` beyond kMaxStridedDims dimensions).
Strided strided_of(const Tensor& t, const char* op);
Strided strided_of(const Shape& shape, const Shape& strides, const char* op);

// A raw view of base's storage with the given shape, strides and offset (not recorded by autograd).
Tensor raw_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);

// Offset (in elements) of the element at row-major linear index `linear` of l's shape.
LIFTOFF_HOST_DEVICE int64_t strided_offset(const Strided& l, int64_t linear) {
  int64_t off = 0;
  for (int d = l.dims - 1; d >= 0; --d) {
    off += (linear % l.shape[d]) * l.strides[d];
    linear /= l.shape[d];
  }
  return off;
}

// Row-major coordinates of `linear` in l's shape.
LIFTOFF_HOST_DEVICE void strided_coords(const Strided& l, int64_t linear, int64_t* coords) {
  for (int d = l.dims - 1; d >= 0; --d) {
    coords[d] = linear % l.shape[d];
    linear /= l.shape[d];
  }
}

}  // namespace liftoff
