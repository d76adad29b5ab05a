// PyTorch's source-coordinate rules for nearest and bilinear upsampling along one axis, shared by the CPU and
// CUDA kernels. A is the computation type (float, or double for f64).
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/macros.h"

namespace liftoff::upsample_math {

// The input index output index `dst` reads (PyTorch's nearest_idx).
LIFTOFF_HD int64_t nearest_source(int64_t dst, int64_t in, int64_t out, float scale) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  const int64_t s = static_cast<int64_t>(floorf(static_cast<float>(dst) * scale));
  return s < in - 1 ? s : in - 1;
}

// Output index dst reads input i0 with weight l0 and i1 with weight l1 (i1 == i0 at the last pixel).
template <class A>
struct Lerp {
  int64_t i0, i1;
  A l0, l1;
};

template <class A>
LIFTOFF_HD Lerp<A> linear_source(int64_t dst, int64_t in, int64_t out, A scale, bool align_corners) {
  if (out == in) return {dst, dst, A(1), A(0)};
  A real = align_corners ? scale * static_cast<A>(dst) : scale * (static_cast<A>(dst) + A(0.5)) - A(0.5);
  if (real < A(0)) real = A(0);
  int64_t i0 = static_cast<int64_t>(real);  // real >= 0: truncation is floor
  if (i0 > in - 1) i0 = in - 1;
  A l1 = real - static_cast<A>(i0);
  l1 = l1 < A(0) ? A(0) : (l1 > A(1) ? A(1) : l1);
  return {i0, i0 + (i0 < in - 1 ? 1 : 0), A(1) - l1, l1};
}

// The weight with which output dst reads input i along one axis (0 when it does not).
template <class A>
LIFTOFF_HD A axis_weight(int64_t dst, int64_t i, int64_t in, int64_t out, A scale, bool bilinear,
                         bool align_corners) {
  if (!bilinear) return nearest_source(dst, in, out, static_cast<float>(scale)) == i ? A(1) : A(0);
  const Lerp<A> l = linear_source<A>(dst, in, out, scale, align_corners);
  return (l.i0 == i ? l.l0 : A(0)) + (l.i1 == i ? l.l1 : A(0));
}

// The lowest input index output dst reads (monotonic in dst).
template <class A>
LIFTOFF_HD int64_t first_source(int64_t dst, int64_t in, int64_t out, A scale, bool bilinear,
                                bool align_corners) {
  if (!bilinear) return nearest_source(dst, in, out, static_cast<float>(scale));
  return linear_source<A>(dst, in, out, scale, align_corners).i0;
}

// The outputs [lo, hi) that can read input i: those whose first source lies in [i - 1, i] (bilinear) or is
// i (nearest). Binary searches, valid because the first source never decreases with dst.
template <class A>
LIFTOFF_HD void reader_range(int64_t i, int64_t in, int64_t out, A scale, bool bilinear, bool align_corners,
                             int64_t* lo, int64_t* hi) {
  const int64_t want = bilinear ? i - 1 : i;
  int64_t a = 0, b = out;  // first dst with first_source >= want
  while (a < b) {
    const int64_t m = (a + b) / 2;
    if (first_source<A>(m, in, out, scale, bilinear, align_corners) >= want)
      b = m;
    else
      a = m + 1;
  }
  *lo = a;
  b = out;  // first dst with first_source > i
  while (a < b) {
    const int64_t m = (a + b) / 2;
    if (first_source<A>(m, in, out, scale, bilinear, align_corners) > i)
      b = m;
    else
      a = m + 1;
  }
  *hi = a;
}

}  // namespace liftoff::upsample_math
