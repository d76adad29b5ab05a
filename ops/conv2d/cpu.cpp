// CPU conv2d: im2col + GEMM per image (gemm::matmul: an AVX-512 micro-kernel where the CPU has it, else
// Eigen), images split across the thread pool (each thread owns its column buffers and its partial weight
// gradient). Stride-1 square kernels take their input gradient as a convolution of gy with the flipped kernel
// and their weight gradient from gy's columns; "same" convolutions on the AVX-512 kernel read those columns
// implicitly from zero-padded planes (no column matrix), and store the output dense straight from the GEMM;
// stride-2 3x3 convolutions read theirs from the input split into row/column parities (Phases). For f32 3x3
// "same" convolutions with 8 or more channels on both sides, the input and weight gradients go to Winograd
// F(4x4, 3x3) instead (cpu_winograd4.cpp), and with LIFTOFF_CPU_WINOGRAD=2 the forward to F(2x2, 3x3)
// (cpu_winograd.cpp; winograd.h). docs/perf.md ("CPU conv2d strategies", "CPU training speed vs PyTorch") has
// the measurements behind these choices.
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/common/cpu_gemm.h"
#include "ops/conv2d/cpu_columns.h"
#include "ops/conv2d/cpu_general.h"
#include "ops/conv2d/kernels.h"
#include "ops/conv2d/winograd.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace conv_detail {
std::vector<gemm::CompactVector> dense_columns(int64_t h, int64_t w, int64_t wp) {
  const int64_t n = h * wp;
  std::vector<gemm::CompactVector> cv(static_cast<size_t>((n + 15) / 16));
  for (size_t v = 0; v < cv.size(); ++v) {
    const int64_t q0 = static_cast<int64_t>(v) * 16;
    unsigned keep = 0;
    for (int64_t l = 0; l < 16 && q0 + l < n; ++l)
      if ((q0 + l) % wp < w) keep |= 1u << l;
    cv[v].dst = q0 / wp * w + std::min(q0 % wp, w);  // dense columns before q0
    cv[v].keep = static_cast<uint16_t>(keep);
    cv[v].stored = static_cast<uint16_t>((1u << __builtin_popcount(keep)) - 1);
  }
  return cv;
}

void add_bias(const float* bias, int64_t rows, int64_t plane, float* __restrict out) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t q = 0; q < plane; ++q) out[m * plane + q] += bias[m];
}

}  // namespace conv_detail

namespace {
using namespace conv_detail;  // NOLINT: this file's own helpers
template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatMap = Eigen::Map<RowMat<T>>;
template <class T>
using ConstMatMap = Eigen::Map<const RowMat<T>>;
template <class T>
using ConstVecMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;

// Output positions o in [lo, hi) whose input index o * stride + offset lies inside [0, in).
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t offset, int64_t stride, int64_t in, int64_t out) {
  const int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  const int64_t l = std::min(lo, out);
  return {l, std::max(l, std::min(hi, out))};
}

// cols[(c, r, s), (oh, ow)] = x[c, oh * stride - p + r, ow * stride - p + s], zero outside the image.
// Rows are short (OW = 7..28 here): plain loops on restrict pointers, which the compiler vectorises, beat a
// memmove/memset call per row.
template <class T>
LIFTOFF_NO_LIBCALL_LOOPS void im2col(const T* x, T* cols, const Conv2dShape& g) {
  const int64_t plane = g.oh * g.ow;
  if (g.stride == 1 && g.oh == g.h && g.ow == g.w) {
    // "Same" convolution (stride 1, output as large as the input): each column row is the input plane shifted
    // by (r - p) rows and (s - p) columns, i.e. one contiguous copy of the flat plane, then zeros where the
    // shift wraps across a row edge or leaves the plane. One long copy instead of OH short ones.
    for (int64_t c = 0; c < g.c; ++c) {
      const T* xc = x + c * plane;
      for (int64_t r = 0; r < g.r; ++r) {
        for (int64_t s = 0; s < g.s; ++s) {
          T* __restrict row = cols + ((c * g.r + r) * g.s + s) * plane;
          const int64_t dr = r - g.padding, ds = s - g.padding;
          const int64_t shift = dr * g.w + ds;
          const int64_t lo = std::max<int64_t>(0, -shift), hi = std::min(plane, plane - shift);
          for (int64_t q = 0; q < lo; ++q) row[q] = T(0);
          const T* __restrict src = xc + lo + shift;
          for (int64_t q = 0; q < hi - lo; ++q) row[lo + q] = src[q];
          for (int64_t q = std::max(lo, hi); q < plane; ++q) row[q] = T(0);
          // Rows whose source row lies outside the image, then the wrapped columns of the others.
          const int64_t oh_lo = std::max<int64_t>(0, -dr), oh_hi = std::min(g.h, g.h - dr);
          for (int64_t q = 0; q < std::min(plane, oh_lo * g.w); ++q) row[q] = T(0);
          for (int64_t q = std::max<int64_t>(0, oh_hi) * g.w; q < plane; ++q) row[q] = T(0);
          if (ds != 0) {
            const int64_t z0 = ds < 0 ? 0 : g.w - ds, z1 = ds < 0 ? -ds : g.w;
            for (int64_t oh = oh_lo; oh < oh_hi; ++oh)
              for (int64_t ow = std::max<int64_t>(0, z0); ow < std::min(g.w, z1); ++ow)
                row[oh * g.w + ow] = T(0);
          }
        }
      }
    }
    return;
  }
  const int64_t ow_n = g.ow, stride = g.stride;
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t r = 0; r < g.r; ++r) {
      for (int64_t s = 0; s < g.s; ++s) {
        T* row = cols + ((c * g.r + r) * g.s + s) * plane;
        const Range ok = valid_outputs(s - g.padding, g.stride, g.w, g.ow);
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          T* __restrict out = row + oh * ow_n;
          const int64_t ih = oh * stride - g.padding + r;
          if (ih < 0 || ih >= g.h) {
            for (int64_t ow = 0; ow < ow_n; ++ow) out[ow] = T(0);
            continue;
          }
          const T* __restrict in = x + (c * g.h + ih) * g.w;
          const int64_t off = s - g.padding;  // in-range columns only: ok excludes the padding
          for (int64_t ow = 0; ow < ok.lo; ++ow) out[ow] = T(0);
          if (stride == 1) {
            for (int64_t ow = ok.lo; ow < ok.hi; ++ow) out[ow] = in[ow + off];
          } else {
            for (int64_t ow = ok.lo; ow < ok.hi; ++ow) out[ow] = in[ow * stride + off];
          }
          for (int64_t ow = ok.hi; ow < ow_n; ++ow) out[ow] = T(0);
        }
      }
    }
  }
}

// The adjoint of im2col: gx = sum of the column entries that read each input pixel.
template <class T>
LIFTOFF_NO_LIBCALL_LOOPS void col2im(const T* cols, T* gx, const Conv2dShape& g) {
  const int64_t plane = g.oh * g.ow;
  const int64_t stride = g.stride;
  std::fill(gx, gx + g.c * g.h * g.w, T(0));
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t r = 0; r < g.r; ++r) {
      for (int64_t s = 0; s < g.s; ++s) {
        const T* row = cols + ((c * g.r + r) * g.s + s) * plane;
        const Range ok = valid_outputs(s - g.padding, g.stride, g.w, g.ow);
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t ih = oh * stride - g.padding + r;
          if (ih < 0 || ih >= g.h) continue;
          const T* __restrict src = row + oh * g.ow;
          T* __restrict dst = gx + (c * g.h + ih) * g.w;
          const int64_t off = s - g.padding;
          if (stride == 1) {
            for (int64_t ow = ok.lo; ow < ok.hi; ++ow) dst[ow + off] += src[ow];
          } else {
            for (int64_t ow = ok.lo; ow < ok.hi; ++ow) dst[ow * stride + off] += src[ow];
          }
        }
      }
    }
  }
}

// A 1x1 kernel with stride 1 and no padding reads the image itself as its column matrix.
bool is_pointwise(const Conv2dShape& g) {
  return g.r == 1 && g.s == 1 && g.stride == 1 && g.padding == 0;
}

template <class T>
bool use_implicit(const Conv2dShape& g) {
  return gemm::has_offset_kernel<T>() && !is_pointwise(g) && g.stride == 1 && g.oh == g.h && g.ow == g.w &&
         g.r == 2 * g.padding + 1 && g.s == g.r;
}

Implicit make_implicit(const Conv2dShape& g, int64_t channels) {
  Implicit im;
  im.hp = g.h + 2 * g.padding;
  im.wp = g.w + 2 * g.padding;
  im.padded_plane = im.hp * im.wp;
  im.wide = g.h * im.wp;
  im.offsets.resize(static_cast<size_t>(channels * g.r * g.s));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s)
        im.offsets[static_cast<size_t>((c * g.r + r) * g.s + s)] = c * im.padded_plane + r * im.wp + s;
  return im;
}

// Size of a padded buffer: the planes plus one padded row of slack (the last wide columns read up to 2p
// elements past the last plane; they only feed junk columns).
int64_t padded_size(const Implicit& im, int64_t channels) {
  return channels * im.padded_plane + im.wp;
}

#if LIFTOFF_HAVE_AVX512_KERNEL
// row[q] = src[q - p] for p <= q < p + w, zero elsewhere in [0, wp): one masked (for the first vector,
// expanding) load and one masked store per 16 columns. The scalar-tailed loops took 3.3% of the batch-128
// step.
__attribute__((target("avx512f"))) void pad_row(const float* src, int64_t w, int64_t p, int64_t wp,
                                                float* row) {
  for (int64_t q0 = 0; q0 < wp; q0 += 16) {
    const int64_t start = q0 - p;  // the column of src in lane 0
    const __m512 v = start >= 0
                         ? _mm512_maskz_loadu_ps(first_lanes(w - start), src + start)
                         : _mm512_maskz_expandloadu_ps(
                               static_cast<__mmask16>(first_lanes(w - start) & ~first_lanes(-start)), src);
    _mm512_mask_storeu_ps(row + q0, first_lanes(wp - q0), v);
  }
}
#else
void pad_row(const float* src, int64_t w, int64_t p, int64_t wp, float* row) {
  for (int64_t q = 0; q < wp; ++q) row[q] = q >= p && q < p + w ? src[q - p] : 0.0f;
}
#endif

// Only reached on the AVX-512 kernel (use_implicit), so f32 only.
LIFTOFF_NO_LIBCALL_LOOPS void pad_planes(const float* x, int64_t channels, const Conv2dShape& g,
                                         const Implicit& im, float* __restrict out) {
  const int64_t p = g.padding;
  for (int64_t c = 0; c < channels; ++c) {
    float* __restrict dst = out + c * im.padded_plane;
    const float* __restrict src = x + c * g.h * g.w;
    for (int64_t q = 0; q < p * im.wp; ++q) dst[q] = 0.0f;
    for (int64_t h = 0; h < g.h; ++h) pad_row(src + h * g.w, g.w, p, im.wp, dst + (h + p) * im.wp);
    for (int64_t q = (g.h + p) * im.wp; q < im.padded_plane; ++q) dst[q] = 0.0f;
  }
  float* __restrict slack = out + channels * im.padded_plane;
  for (int64_t q = 0; q < im.wp; ++q) slack[q] = 0.0f;
}

// out[m, h, w] = wide[m, h * Wp + w] (+ bias[m])
template <class T>
LIFTOFF_NO_LIBCALL_LOOPS void compact(const T* wide, int64_t rows, const Conv2dShape& g, const Implicit& im,
                                      const T* bias, T* __restrict out) {
  for (int64_t m = 0; m < rows; ++m) {
    const T b = bias ? bias[m] : T(0);
    for (int64_t h = 0; h < g.h; ++h) {
      const T* __restrict src = wide + m * im.wide + h * im.wp;
      T* __restrict dst = out + (m * g.h + h) * g.w;
      for (int64_t q = 0; q < g.w; ++q) dst[q] = src[q] + b;
    }
  }
}

template <class T>
void forward_impl(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                  const Conv2dShape& g) {
  const int64_t crs = g.c * g.r * g.s;
  const int64_t plane = g.oh * g.ow;
  const bool pointwise = is_pointwise(g);
  const T* xd = x.data<T>();
  const T* bd = bias.defined() ? bias.data<T>() : nullptr;
  T* yd = y.data<T>();
  if (conv_general::applies(g)) {  // groups, dilation: none of the tuned paths below
    conv_general::forward(xd, w.data<T>(), bd, yd, g);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (winograd::use_forward(g)) {
      winograd::forward(xd, w.data<T>(), bd, yd, g);
      return;
    }
  }
  // Eigen's GEMM is single-threaded (runtime/parallel.h). Fewer images than threads (batch-1 inference):
  // one image at a time, its output columns split across the threads.
  if (g.n < num_threads()) {
    for (int64_t i = 0; i < g.n; ++i) {
      const T* xi = xd + i * g.c * g.h * g.w;
      T* cols = pointwise ? nullptr : scratch<T>(0, crs * plane);
      if (!pointwise) im2col(xi, cols, g);
      MatMap<T> out(yd + i * g.k * plane, g.k, plane);
      const T* src = pointwise ? xi : cols;
      T* dst = yd + i * g.k * plane;
      parallel_for(0, plane, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, g.k * crs)),
                   [&](int64_t lo, int64_t hi) {
                     gemm::matmul<T>(g.k, hi - lo, crs, w.data<T>(), crs, src + lo, plane, dst + lo, plane);
                   });
      if (bd) out.colwise() += ConstVecMap<T>(bd, g.k);
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (use_phases(g)) {
      forward_phases(xd, w.data<T>(), bd, yd, g);
      return;
    }
    if (use_implicit<T>(g)) {
      const Implicit im = make_implicit(g, g.c);
      const std::vector<gemm::CompactVector> dense = dense_columns(g.h, g.w, im.wp);
      parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
        T* padded = scratch<T>(0, padded_size(im, g.c));
        for (int64_t i = lo; i < hi; ++i) {
          pad_planes(xd + i * g.c * g.h * g.w, g.c, g, im, padded);
          T* yi = yd + i * g.k * plane;
          gemm::matmul_offsets(g.k, im.wide, crs, w.data<T>(), crs, nullptr, padded, 0, im.offsets.data(), yi,
                               plane, /*accumulate=*/false, dense.data());
          if (bd) add_bias(bd, g.k, plane, yi);
        }
      });
      return;
    }
  }
  parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
    T* cols = pointwise ? nullptr : scratch<T>(0, crs * plane);
    for (int64_t i = lo; i < hi; ++i) {
      const T* xi = xd + i * g.c * g.h * g.w;
      if (!pointwise) im2col(xi, cols, g);
      MatMap<T> out(yd + i * g.k * plane, g.k, plane);
      gemm::matmul<T>(g.k, plane, crs, w.data<T>(), crs, pointwise ? xi : cols, plane, out.data(), plane);
      if (bd) out.colwise() += ConstVecMap<T>(bd, g.k);
    }
  });
}

template <class T>
void backward_impl(const Tensor& x, const Tensor& w, const Tensor& gy, const Tensor& gx, const Tensor& gw,
                   const Tensor& gb, const Conv2dShape& g) {
  const int64_t crs = g.c * g.r * g.s;
  const int64_t plane = g.oh * g.ow;
  const bool pointwise = is_pointwise(g);
  const T* gyd = gy.data<T>();
  if (gb.defined()) {
    T* gbd = gb.data<T>();
    const int64_t per_filter = g.n * plane;
    parallel_for(0, g.k, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(per_filter, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t k = lo; k < hi; ++k) {
                     double total = 0.0;  // double even for f32: the sum runs over N * OH * OW terms
                     for (int64_t i = 0; i < g.n; ++i) {
                       const T* row = gyd + (i * g.k + k) * plane;
                       for (int64_t p = 0; p < plane; ++p) total += static_cast<double>(row[p]);
                     }
                     gbd[k] = static_cast<T>(total);
                   }
                 });
  }
  if (!gx.defined() && !gw.defined()) return;
  if (g.n == 0) {
    if (gw.defined()) gw.zero_();
    return;
  }
  if (conv_general::applies(g)) {
    conv_general::backward(gw.defined() ? x.data<T>() : nullptr, gx.defined() ? w.data<T>() : nullptr, gyd,
                           gx.defined() ? gx.data<T>() : nullptr, gw.defined() ? gw.data<T>() : nullptr, g);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (winograd::use_backward(g)) {
      if (gx.defined()) winograd::f4::input_grad(gyd, w.data<T>(), gx.data<T>(), g);
      if (gw.defined()) winograd::f4::weight_grad(x.data<T>(), gyd, gw.data<T>(), g);
      return;
    }
    if (use_phases(g)) {
      backward_phases(gw.defined() ? x.data<T>() : nullptr, gx.defined() ? w.data<T>() : nullptr, gyd,
                      gx.defined() ? gx.data<T>() : nullptr, gw.defined() ? gw.data<T>() : nullptr, g);
      return;
    }
  }
  // Fixed image chunks with one partial weight gradient each, summed in chunk order: deterministic for a
  // given thread count.
  const int64_t chunks = std::min<int64_t>(g.n, num_threads());
  // Partial weight gradients, transposed ([C*R*S, K]): gw^T += cols * gy^T is a product of two row-major
  // matrices (gy^T is a small copy), the form of gemm::matmul, accumulated in place over the chunk's images.
  std::vector<RowMat<T>> gw_parts(gw.defined() ? static_cast<size_t>(chunks) : 0);
  const T* xd = gw.defined() ? x.data<T>() : nullptr;
  const T* wd = gx.defined() ? w.data<T>() : nullptr;
  T* gxd = gx.defined() ? gx.data<T>() : nullptr;
  // Stride 1, square kernel: the input gradient is itself a convolution of gy (padding R-1-p) with the
  // flipped kernel, channels swapped: one im2col of gy and a GEMM of depth K*R*S, instead of a GEMM of depth
  // K into C*R*S x OH*OW columns and their scatter-add (col2im). Same size, far better arithmetic intensity.
  const bool transposed = gx.defined() && !pointwise && g.stride == 1 && g.r == g.s;
  Conv2dShape gt{};
  RowMat<T> flipped;
  if (transposed) {
    gt = Conv2dShape{g.n, g.k, g.oh, g.ow, g.c, g.r, g.s, g.h, g.w, 1, g.r - 1 - g.padding, false};
    flipped.resize(g.c, g.k * g.r * g.s);  // flipped[c, (k, r', s')] = w[k, c, R-1-r', S-1-s']
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t r = 0; r < g.r; ++r)
          for (int64_t q = 0; q < g.s; ++q)
            flipped(c, (k * g.r + (g.r - 1 - r)) * g.s + (g.s - 1 - q)) =
                wd[((k * g.c + c) * g.r + r) * g.s + q];
  }
  const int64_t krs = g.k * g.r * g.s;
  RowMat<T> weight_t;  // [C*R*S, K], for the input gradient without the flip
  if (gx.defined() && !transposed) weight_t = ConstMatMap<T>(wd, g.k, crs).transpose();
  // With the transposed path the weight gradient reuses gy's columns too: gw[k, c, r, s] =
  // sum_p x[c, p] * gy_cols[(k, R-1-r, S-1-s), p], so gw'[(k, r', s'), c] += gy_cols * x^T (x^T a small
  // copy) and x needs no im2col in backward at all. Partials are then [K*R*S, C] instead of [C*R*S, K].
  const bool gw_from_gy = transposed && gw.defined();
  const int64_t hw = g.h * g.w;
  // Implicit im2col of gy (a "same" convolution here, so gt is one too): gx from the padded gy planes, and
  // the weight gradient with gy's padded planes as the rows of A and x^T laid out on the wide columns (zero
  // rows for the junk columns).
  if constexpr (std::is_same_v<T, float>) {
    if (transposed && use_implicit<T>(gt)) {
      const Implicit im = make_implicit(gt, g.k);
      parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
        T* padded = scratch<T>(1, padded_size(im, g.k));
        T* wide = scratch<T>(0, g.c * im.wide);
        T* x_t = gw_from_gy ? scratch<T>(2, im.wide * g.c) : nullptr;
        for (int64_t chunk = lo; chunk < hi; ++chunk) {
          T* part = nullptr;
          if (gw_from_gy) {
            RowMat<T>& pm = gw_parts[static_cast<size_t>(chunk)];
            pm = RowMat<T>::Zero(krs, g.c);
            part = pm.data();
          }
          for (int64_t i = g.n * chunk / chunks; i < g.n * (chunk + 1) / chunks; ++i) {
            pad_planes(gyd + i * g.k * plane, g.k, gt, im, padded);
            if (gw_from_gy) {
              transpose_wide(xd + i * g.c * hw, g.c, g, im, x_t);
              // Row (k, r', s') of gy's columns is padded gy plane k read from r' * Wp + s': one product per
              // (r', s') with A rows HpWp apart, written to every RS-th row of the partial.
              for (int64_t rs = 0; rs < g.r * g.s; ++rs) {
                gemm::matmul<T>(g.k, g.c, im.wide, padded + im.offsets[static_cast<size_t>(rs)],
                                im.padded_plane, x_t, g.c, part + rs * g.c, g.r * g.s * g.c,
                                /*accumulate=*/true);
              }
            }
            gemm::matmul_offsets(g.c, im.wide, krs, flipped.data(), krs, nullptr, padded, 0,
                                 im.offsets.data(), wide, im.wide);
            compact(wide, g.c, gt, im, static_cast<const T*>(nullptr), gxd + i * g.c * hw);
          }
        }
      });
    }
  }
  const bool implicit_done = transposed && use_implicit<T>(gt) && std::is_same_v<T, float>;
  if (!implicit_done)
    parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
      T* cols = pointwise || !gw.defined() || gw_from_gy ? nullptr : scratch<T>(0, crs * plane);
      T* gy_t = gw.defined() ? scratch<T>(2, gw_from_gy ? g.c * hw : g.k * plane) : nullptr;
      T* grad_cols =
          pointwise || !gx.defined() ? nullptr : scratch<T>(1, transposed ? krs * hw : crs * plane);
      for (int64_t chunk = lo; chunk < hi; ++chunk) {
        T* part = nullptr;
        if (gw.defined()) {
          RowMat<T>& p = gw_parts[static_cast<size_t>(chunk)];
          p = gw_from_gy ? RowMat<T>::Zero(krs, g.c) : RowMat<T>::Zero(crs, g.k);
          part = p.data();
        }
        for (int64_t i = g.n * chunk / chunks; i < g.n * (chunk + 1) / chunks; ++i) {
          const ConstMatMap<T> grad_out(gyd + i * g.k * plane, g.k, plane);
          const T* xi = gw.defined() ? xd + i * g.c * hw : nullptr;
          if (transposed) {
            im2col(gyd + i * g.k * plane, grad_cols, gt);
            if (gw_from_gy) {
              MatMap<T>(gy_t, hw, g.c) = ConstMatMap<T>(xi, g.c, hw).transpose();
              gemm::matmul<T>(krs, g.c, hw, grad_cols, hw, gy_t, g.c, part, g.c, /*accumulate=*/true);
            }
            gemm::matmul<T>(g.c, hw, krs, flipped.data(), krs, grad_cols, hw, gxd + i * g.c * hw, hw);
            continue;
          }
          if (gw.defined()) {
            if (!pointwise) im2col(xi, cols, g);
            MatMap<T>(gy_t, plane, g.k) = grad_out.transpose();
            gemm::matmul<T>(crs, g.k, plane, pointwise ? xi : cols, plane, gy_t, g.k, part, g.k,
                            /*accumulate=*/true);
          }
          if (gx.defined()) {
            T* gxi = gxd + i * g.c * hw;
            if (pointwise) {
              gemm::matmul<T>(crs, plane, g.k, weight_t.data(), g.k, grad_out.data(), plane, gxi, plane);
            } else {
              gemm::matmul<T>(crs, plane, g.k, weight_t.data(), g.k, grad_out.data(), plane, grad_cols,
                              plane);
              col2im(grad_cols, gxi, g);
            }
          }
        }
      }
    });
  if (gw.defined()) {
    RowMat<T> sum = gw_parts[0];
    for (size_t c = 1; c < gw_parts.size(); ++c) sum += gw_parts[c];
    T* out = gw.data<T>();
    if (gw_from_gy) {
      for (int64_t k = 0; k < g.k; ++k)
        for (int64_t c = 0; c < g.c; ++c)
          for (int64_t r = 0; r < g.r; ++r)
            for (int64_t q = 0; q < g.s; ++q)
              out[((k * g.c + c) * g.r + r) * g.s + q] =
                  sum((k * g.r + (g.r - 1 - r)) * g.s + (g.s - 1 - q), c);
    } else {
      MatMap<T>(out, g.k, crs) = sum.transpose();
    }
  }
}
}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                    const Conv2dShape& g) {
  dispatch_float(x.dtype(), "conv2d", [&](auto tag) { forward_impl<decltype(tag)>(x, w, bias, y, g); });
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dShape& g, bool accumulate_gx) {
  // The kernels overwrite: an accumulated input gradient is computed aside and added.
  const Tensor gx_out =
      gx.defined() && accumulate_gx ? Tensor::empty(gx.shape(), gx.dtype(), gx.device()) : gx;
  dispatch_float(gy.dtype(), "conv2d backward",
                 [&](auto tag) { backward_impl<decltype(tag)>(x, w, gy, gx_out, gw, gb, g); });
  if (gx_out.defined() && accumulate_gx) accumulate_into(gx, gx_out);
}

}  // namespace liftoff::cpu
