// The reflect/replicate backward shared by the CPU and CUDA kernels: gx[i] = sum of gy over the outputs whose
// source is i. Along one dim, the outputs reading input coordinate i form at most 3 ranges (the copy itself,
// a left and a right mirror for reflect; the copy widened to the edge pads for replicate).
#pragma once
#include "ops/common/remap.h"

namespace liftoff {

constexpr int kMaxPadBackwardDims = 3;

struct PadRange {
  int64_t lo, hi;  // output coordinates, inclusive
};

// Output ranges along one dim (input size n, output size m, left pad l) whose source is input coordinate i.
LIFTOFF_HOST_DEVICE int pad_sources(DimRemap map, int64_t i, int64_t n, int64_t m, PadRange* out) {
  const int64_t l = map.shift;
  if (map.kind == RemapKind::pad_replicate) {
    out[0] = {i == 0 ? 0 : i + l, i == n - 1 ? m - 1 : i + l};
    return 1;
  }
  if (map.kind != RemapKind::pad_reflect) {
    out[0] = {i, i};
    return 1;
  }
  int count = 0;
  out[count++] = {i + l, i + l};
  if (i >= 1 && i <= l) out[count++] = {l - i, l - i};
  const int64_t mirror = l + 2 * (n - 1) - i;
  if (i <= n - 2 && mirror < m) out[count++] = {mirror, mirror};
  return count;
}

// Sum, in type A, of gy over the outputs that read input element `linear` of x's shape (`xs`); gy's strides
// and shape in `gs`. load(offset) reads gy as A. The padded dims are the last `padded` of them (<= 3).
template <class A, class Load>
LIFTOFF_HOST_DEVICE A pad_backward_element(const Strided& xs, const Strided& gs, const RemapPlan& plan,
                                           int padded, int64_t linear, Load load) {
  int64_t coords[kMaxStridedDims];
  strided_coords(xs, linear, coords);
  const int first = xs.dims - padded;
  int64_t base = 0;
  for (int d = 0; d < first; ++d) base += coords[d] * gs.strides[d];
  // Unused padded slots are one range of one element with stride 0.
  PadRange ranges[kMaxPadBackwardDims][3];
  int counts[kMaxPadBackwardDims];
  int64_t strides[kMaxPadBackwardDims];
  for (int j = 0; j < kMaxPadBackwardDims; ++j) {
    const int d = first + j;
    if (j < padded) {
      counts[j] = pad_sources(plan.dims[d], coords[d], xs.shape[d], gs.shape[d], ranges[j]);
      strides[j] = gs.strides[d];
    } else {
      counts[j] = 1;
      ranges[j][0] = {0, 0};
      strides[j] = 0;
    }
  }
  A acc = 0;
  for (int c0 = 0; c0 < counts[0]; ++c0) {
    for (int64_t o0 = ranges[0][c0].lo; o0 <= ranges[0][c0].hi; ++o0) {
      for (int c1 = 0; c1 < counts[1]; ++c1) {
        for (int64_t o1 = ranges[1][c1].lo; o1 <= ranges[1][c1].hi; ++o1) {
          for (int c2 = 0; c2 < counts[2]; ++c2) {
            for (int64_t o2 = ranges[2][c2].lo; o2 <= ranges[2][c2].hi; ++o2) {
              acc += load(base + o0 * strides[0] + o1 * strides[1] + o2 * strides[2]);
            }
          }
        }
      }
    }
  }
  return acc;
}

}  // namespace liftoff
