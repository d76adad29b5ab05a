#include "ops/conv2d/cpu_general.h"

#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "runtime/parallel.h"

namespace liftoff::cpu::conv_general {

namespace {
template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatMap = Eigen::Map<RowMat<T>>;
template <class T>
using ConstMatMap = Eigen::Map<const RowMat<T>>;

// The input position read by output position o through tap t, or -1 outside the image.
inline int64_t source(int64_t o, int64_t t, int64_t in, const Conv2dShape& g) {
  const int64_t i = o * g.stride - g.padding + t * g.dilation;
  return i >= 0 && i < in ? i : -1;
}

// cols[(c, r, s), (oh, ow)] = x[c, ih, iw] of one group's channels (zero where the tap falls in the padding).
template <class T>
void im2col(const T* x, T* cols, const Conv2dShape& g) {
  const int64_t plane = g.oh * g.ow;
  for (int64_t c = 0; c < g.cg(); ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        T* row = cols + ((c * g.r + r) * g.s + s) * plane;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t ih = source(oh, r, g.h, g);
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const int64_t iw = source(ow, s, g.w, g);
            row[oh * g.ow + ow] = ih >= 0 && iw >= 0 ? x[(c * g.h + ih) * g.w + iw] : T(0);
          }
        }
      }
}

// The adjoint of im2col: adds every column entry to the pixel it was read from (gx zeroed by the caller).
template <class T>
void col2im(const T* cols, T* gx, const Conv2dShape& g) {
  const int64_t plane = g.oh * g.ow;
  for (int64_t c = 0; c < g.cg(); ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        const T* row = cols + ((c * g.r + r) * g.s + s) * plane;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t ih = source(oh, r, g.h, g);
          if (ih < 0) continue;
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const int64_t iw = source(ow, s, g.w, g);
            if (iw >= 0) gx[(c * g.h + ih) * g.w + iw] += row[oh * g.ow + ow];
          }
        }
      }
}

// Depthwise convolutions (one input and one output channel per group) run directly on each plane: the
// im2col + 1 x (R*S) GEMM per image and channel cost more in calls than in arithmetic (MobileNetV2's
// depthwise layers were about 30% of its CPU step in im2col and the per-group GEMMs).
bool depthwise(const Conv2dShape& g) {
  return g.groups == g.c && g.k == g.c;
}

// Output columns [lo, hi) whose tap s reads inside the row: iw = ow * stride - padding + s * dilation.
struct Span {
  int64_t lo, hi;
};
inline Span valid_columns(int64_t s, const Conv2dShape& g) {
  const int64_t offset = s * g.dilation - g.padding;  // iw of ow = 0
  const int64_t lo = offset >= 0 ? 0 : (-offset + g.stride - 1) / g.stride;
  const int64_t hi = g.w - 1 - offset < 0 ? 0 : (g.w - 1 - offset) / g.stride + 1;
  const int64_t l = std::min(lo, g.ow);
  return {l, std::max(l, std::min(hi, g.ow))};
}

// y[oh, ow] (+)= w[r, s] * x[ih, iw] over the taps, for one plane (`y` starts at the bias or zero).
template <class T>
void depthwise_plane_forward(const T* x, const T* w, T* y, const Conv2dShape& g) {
  for (int64_t r = 0; r < g.r; ++r) {
    for (int64_t s = 0; s < g.s; ++s) {
      const T wt = w[r * g.s + s];
      const Span span = valid_columns(s, g);
      const int64_t shift = s * g.dilation - g.padding;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t ih = source(oh, r, g.h, g);
        if (ih < 0) continue;
        const T* row = x + ih * g.w;
        T* out = y + oh * g.ow;
        for (int64_t ow = span.lo; ow < span.hi; ++ow) out[ow] += wt * row[ow * g.stride + shift];
      }
    }
  }
}

// gx[ih, iw] += w[r, s] * gy[oh, ow] over the taps, for one plane (gx zeroed by the caller); and the taps'
// gradient sums gw[r, s] += gy[oh, ow] * x[ih, iw].
template <class T>
void depthwise_plane_backward(const T* x, const T* w, const T* gy, T* gx, T* gw, const Conv2dShape& g) {
  for (int64_t r = 0; r < g.r; ++r) {
    for (int64_t s = 0; s < g.s; ++s) {
      const Span span = valid_columns(s, g);
      const int64_t shift = s * g.dilation - g.padding;
      T tap_sum = T(0);
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t ih = source(oh, r, g.h, g);
        if (ih < 0) continue;
        const T* grad = gy + oh * g.ow;
        if (gx != nullptr) {
          const T wt = w[r * g.s + s];
          T* row = gx + ih * g.w;
          for (int64_t ow = span.lo; ow < span.hi; ++ow) row[ow * g.stride + shift] += wt * grad[ow];
        }
        if (gw != nullptr) {
          const T* row = x + ih * g.w;
          for (int64_t ow = span.lo; ow < span.hi; ++ow) tap_sum += grad[ow] * row[ow * g.stride + shift];
        }
      }
      if (gw != nullptr) gw[r * g.s + s] += tap_sum;
    }
  }
}

template <class T>
void depthwise_forward(const T* x, const T* w, const T* bias, T* y, const Conv2dShape& g) {
  const int64_t plane = g.oh * g.ow, taps = g.r * g.s;
  parallel_for(0, g.n * g.c, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t c = p % g.c;
      T* out = y + p * plane;
      std::fill(out, out + plane, bias != nullptr ? bias[c] : T(0));
      depthwise_plane_forward(x + p * g.h * g.w, w + c * taps, out, g);
    }
  });
}

// Split by channel: each channel's weight gradient sums its images in order, so the result does not depend
// on the thread count.
template <class T>
void depthwise_backward(const T* x, const T* w, const T* gy, T* gx, T* gw, const Conv2dShape& g) {
  const int64_t plane = g.oh * g.ow, hw = g.h * g.w, taps = g.r * g.s;
  parallel_for(0, g.c, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      T* gwc = gw != nullptr ? gw + c * taps : nullptr;
      if (gwc != nullptr) std::fill(gwc, gwc + taps, T(0));
      for (int64_t i = 0; i < g.n; ++i) {
        const int64_t p = i * g.c + c;
        T* gxp = gx != nullptr ? gx + p * hw : nullptr;
        if (gxp != nullptr) std::fill(gxp, gxp + hw, T(0));
        depthwise_plane_backward(x != nullptr ? x + p * hw : nullptr, w != nullptr ? w + c * taps : nullptr,
                                 gy + p * plane, gxp, gwc, g);
      }
    }
  });
}
}  // namespace

template <class T>
void forward(const T* x, const T* w, const T* bias, T* y, const Conv2dShape& g) {
  if (depthwise(g)) return depthwise_forward(x, w, bias, y, g);
  const int64_t crs = g.cg() * g.r * g.s, plane = g.oh * g.ow;
  parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> cols(static_cast<size_t>(crs * plane));
    for (int64_t i = lo; i < hi; ++i) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        im2col(x + (i * g.c + grp * g.cg()) * g.h * g.w, cols.data(), g);
        MatMap<T> out(y + (i * g.k + grp * g.kg()) * plane, g.kg(), plane);
        out.noalias() =
            ConstMatMap<T>(w + grp * g.kg() * crs, g.kg(), crs) * ConstMatMap<T>(cols.data(), crs, plane);
        if (bias != nullptr)
          for (int64_t k = 0; k < g.kg(); ++k) out.row(k).array() += bias[grp * g.kg() + k];
      }
    }
  });
}

template <class T>
void backward(const T* x, const T* w, const T* gy, T* gx, T* gw, const Conv2dShape& g) {
  if (depthwise(g)) return depthwise_backward(x, w, gy, gx, gw, g);
  const int64_t crs = g.cg() * g.r * g.s, plane = g.oh * g.ow;
  const int64_t hw = g.h * g.w, weights = g.k * crs;
  // Fixed image chunks, one partial weight gradient each, summed in chunk order: deterministic for a given
  // thread count (as cpu.cpp).
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(g.n, num_threads()));
  std::vector<T> parts(gw != nullptr ? static_cast<size_t>(chunks * weights) : 0, T(0));
  parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> cols(static_cast<size_t>(crs * plane));
    for (int64_t chunk = lo; chunk < hi; ++chunk) {
      for (int64_t i = g.n * chunk / chunks; i < g.n * (chunk + 1) / chunks; ++i) {
        if (gx != nullptr) std::fill(gx + i * g.c * hw, gx + (i + 1) * g.c * hw, T(0));
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          const ConstMatMap<T> grad_out(gy + (i * g.k + grp * g.kg()) * plane, g.kg(), plane);
          const int64_t x_offset = (i * g.c + grp * g.cg()) * hw;
          if (gw != nullptr) {
            im2col(x + x_offset, cols.data(), g);
            MatMap<T>(parts.data() + chunk * weights + grp * g.kg() * crs, g.kg(), crs).noalias() +=
                grad_out * ConstMatMap<T>(cols.data(), crs, plane).transpose();
          }
          if (gx != nullptr) {
            MatMap<T>(cols.data(), crs, plane).noalias() =
                ConstMatMap<T>(w + grp * g.kg() * crs, g.kg(), crs).transpose() * grad_out;
            col2im(cols.data(), gx + x_offset, g);
          }
        }
      }
    }
  });
  if (gw != nullptr) {
    std::copy(parts.begin(), parts.begin() + weights, gw);
    for (int64_t chunk = 1; chunk < chunks; ++chunk)
      for (int64_t q = 0; q < weights; ++q) gw[q] += parts[static_cast<size_t>(chunk * weights + q)];
  }
}

template void forward<float>(const float*, const float*, const float*, float*, const Conv2dShape&);
template void forward<double>(const double*, const double*, const double*, double*, const Conv2dShape&);
template void backward<float>(const float*, const float*, const float*, float*, float*, const Conv2dShape&);
template void backward<double>(const double*, const double*, const double*, double*, double*,
                               const Conv2dShape&);

}  // namespace liftoff::cpu::conv_general
