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
}  // namespace

template <class T>
void forward(const T* x, const T* w, const T* bias, T* y, const Conv2dShape& g) {
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
