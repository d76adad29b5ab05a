#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "ops/batch_norm2d/kernels.h"
#include "ops/common/cpu_gemm.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
// Per-plane sums in double (as PyTorch's CPU kernel: gradient sums cancel to values far below their terms),
// in kLanes independent accumulators combined in a fixed order at the end: the lanes vectorise (float->double
// conversion, add, multiply-add on 4-wide double vectors) and break the add latency chain of a single
// accumulator. Planes are added in image order: the result does not depend on the thread count.
//
// Each thread walks its channels image by image (planes (n, lo) .. (n, hi - 1) are one contiguous stream),
// not channel by channel: a channel's planes are a whole image apart, and at 7x7 a plane is only a few cache
// lines, too short for the hardware prefetcher to follow (7x7 forward + backward 1.2x faster this way).
// The statistics then take one pass over memory: each plane's sum and centered square sum (two passes over
// the plane, in L1), merged into the channel's in image order (Chan et al.'s pairwise update).
constexpr int kLanes = 16;

double combine(const double* acc) {
  double total = 0.0;
  for (int j = 0; j < kLanes; ++j) total += acc[j];
  return total;
}

// The compiler keeps the lane loops scalar (a chain of float->double conversions and adds); GCC/Clang vector
// extensions spell out four 4-wide double vectors, lane j summing the elements i with i % 16 == j.
typedef float F4 __attribute__((vector_size(16)));
typedef double D4 __attribute__((vector_size(32)));

template <class T>
inline D4 load4(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
#if defined(__AVX__)
    // One vcvtps2pd from memory; the memcpy + convertvector form compiled to 2-wide conversions, lane
    // inserts and stack spills (seen in the profile). Same values either way.
    return reinterpret_cast<D4>(_mm256_cvtps_pd(_mm_loadu_ps(p)));
#else
    F4 f;
    std::memcpy(&f, p, sizeof f);
    return __builtin_convertvector(f, D4);
#endif
  } else {
    D4 d;
    std::memcpy(&d, p, sizeof d);
    return d;
  }
}

inline void spill(const D4* v, double* acc) {
  for (int q = 0; q < kLanes / 4; ++q)
    for (int j = 0; j < 4; ++j) acc[4 * q + j] = v[q][j];
}

template <class T>
double plane_sum(const T* x, int64_t n) {
  D4 v[kLanes / 4] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int q = 0; q < kLanes / 4; ++q) v[q] += load4(x + i + 4 * q);
  double acc[kLanes];
  spill(v, acc);
  for (int j = 0; i + j < n; ++j) acc[j] += static_cast<double>(x[i + j]);
  return combine(acc);
}

// sum of (x - mean)^2
template <class T>
double plane_centered_sq(const T* x, int64_t n, double mean) {
  D4 v[kLanes / 4] = {};
  const D4 m = {mean, mean, mean, mean};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int q = 0; q < kLanes / 4; ++q) {
      const D4 d = load4(x + i + 4 * q) - m;
      v[q] += d * d;
    }
  }
  double acc[kLanes];
  spill(v, acc);
  for (int j = 0; i + j < n; ++j) {
    const double d = static_cast<double>(x[i + j]) - mean;
    acc[j] += d * d;
  }
  return combine(acc);
}

// sum of g and sum of g * (x - mean), in one pass
template <class T>
void plane_grad_sums(const T* g, const T* x, int64_t n, double mean, double& sum_g, double& sum_gx) {
  D4 va[kLanes / 4] = {}, vb[kLanes / 4] = {};
  const D4 m = {mean, mean, mean, mean};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int q = 0; q < kLanes / 4; ++q) {
      const D4 gv = load4(g + i + 4 * q);
      va[q] += gv;
      vb[q] += gv * (load4(x + i + 4 * q) - m);
    }
  }
  double a[kLanes], b[kLanes];
  spill(va, a);
  spill(vb, b);
  for (int j = 0; i + j < n; ++j) {
    const double gv = static_cast<double>(g[i + j]);
    a[j] += gv;
    b[j] += gv * (static_cast<double>(x[i + j]) - mean);
  }
  sum_g += combine(a);
  sum_gx += combine(b);
}

// Element-wise outputs in T.
template <class T>
using Plane = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using OutPlane = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

#if LIFTOFF_HAVE_AVX512_KERNEL
// f32 planes on AVX-512 hosts (the host build targets AVX2): 8-wide double sums (the generic lanes are
// 4-wide), the fused ReLU's mask and the residual add in the same pass, masked loads for a plane's tail.
namespace avx512 {
#define LIFTOFF_AVX512 __attribute__((target("avx512f")))
// GCC 12 flags the _mm512_undefined_* passthrough inside its own cast and extract intrinsics as uninitialized
// once they are inlined here (GCC bug 105593); nothing uninitialized is read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

LIFTOFF_AVX512 inline __m512d lo_pd(__m512 v) {
  return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}
LIFTOFF_AVX512 inline __m512d hi_pd(__m512 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
LIFTOFF_AVX512 inline __mmask16 first(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
}
LIFTOFF_AVX512 inline double total(__m512d a, __m512d b) {
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, _mm512_add_pd(a, b));
  double sum = 0.0;
  for (double v : lanes) sum += v;
  return sum;
}

// The first pass over a plane reads from memory: each step also fetches the same offset of the next plane of
// the walk, `ahead` elements on. A channel's planes are an image apart and at 28x28 only 3 KiB long, too
// short for the hardware prefetcher, and those loads stalled (batch-128 training 3.5% faster with the
// fetches).
LIFTOFF_AVX512 inline void fetch(const float* p, int64_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
}

LIFTOFF_AVX512 void plane_moments(const float* x, int64_t n, int64_t ahead, double& sum, double& m2) {
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    fetch(x + i, ahead);
    const __m512 v = _mm512_maskz_loadu_ps(first(n - i), x + i);
    a = _mm512_add_pd(a, lo_pd(v));
    b = _mm512_add_pd(b, hi_pd(v));
  }
  sum = total(a, b);
  const __m512d m = _mm512_set1_pd(sum / static_cast<double>(n));
  a = b = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    const __m512d da = _mm512_maskz_sub_pd(static_cast<__mmask8>(k), lo_pd(v), m);
    const __m512d db = _mm512_maskz_sub_pd(static_cast<__mmask8>(k >> 8), hi_pd(v), m);
    a = _mm512_fmadd_pd(da, da, a);
    b = _mm512_fmadd_pd(db, db, b);
  }
  m2 = total(a, b);
}

LIFTOFF_AVX512 void plane_output(const float* x, const float* res, bool relu, float scale, float shift,
                                 float* y, int64_t n) {
  const __m512 s = _mm512_set1_ps(scale), t = _mm512_set1_ps(shift), zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, x + i), s, t);
    if (res != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, res + i));
    if (relu) v = _mm512_max_ps(v, zero);
    _mm512_mask_storeu_ps(y + i, k, v);
  }
}

// gy where the fused ReLU's output y is positive (gy itself without one), zero in the masked-off lanes.
LIFTOFF_AVX512 inline __m512 grad_in(const float* gy, const float* y, int64_t i, __mmask16 k) {
  const __m512 g = _mm512_maskz_loadu_ps(k, gy + i);
  if (y == nullptr) return g;
  const __mmask16 pos =
      _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, y + i), _mm512_setzero_ps(), _CMP_GT_OQ);
  return _mm512_maskz_mov_ps(pos, g);
}

LIFTOFF_AVX512 void plane_grad_sums(const float* gy, const float* y, const float* x, float* masked, int64_t n,
                                    int64_t ahead, double mean, double& sum_g, double& sum_gx) {
  const __m512d m = _mm512_set1_pd(mean);
  __m512d ga = _mm512_setzero_pd(), gb = _mm512_setzero_pd();
  __m512d xa = _mm512_setzero_pd(), xb = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    fetch(gy + i, ahead);
    if (y != nullptr) fetch(y + i, ahead);
    fetch(x + i, ahead);
    const __m512 g = grad_in(gy, y, i, k);
    if (masked != nullptr) _mm512_mask_storeu_ps(masked + i, k, g);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    const __m512d g0 = lo_pd(g), g1 = hi_pd(g);
    ga = _mm512_add_pd(ga, g0);
    gb = _mm512_add_pd(gb, g1);
    // Masked-off lanes: g is zero there, so the product is too.
    xa = _mm512_fmadd_pd(g0, _mm512_sub_pd(lo_pd(v), m), xa);
    xb = _mm512_fmadd_pd(g1, _mm512_sub_pd(hi_pd(v), m), xb);
  }
  sum_g += total(ga, gb);
  sum_gx += total(xa, xb);
}

LIFTOFF_AVX512 void plane_grad_input(const float* gy, const float* y, const float* x, float mean, float a,
                                     float bx, float c0, float* gx, int64_t n) {
  const __m512 m = _mm512_set1_ps(mean), va = _mm512_set1_ps(a), vb = _mm512_set1_ps(bx),
               vc = _mm512_set1_ps(c0);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    const __m512 g = grad_in(gy, y, i, k);
    const __m512 xm = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m);
    _mm512_mask_storeu_ps(gx + i, k, _mm512_fmadd_ps(g, va, _mm512_fmadd_ps(xm, vb, vc)));
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef LIFTOFF_AVX512
}  // namespace avx512
#endif

template <class T>
bool use_avx512() {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if constexpr (std::is_same_v<T, float>) return gemm::cpu_has_avx512f();
#endif
  return false;
}

// Sum of a plane and the sum of squares about the plane's own mean.
template <class T>
void plane_moments(const T* x, int64_t n, [[maybe_unused]] int64_t ahead, double& sum, double& m2) {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if constexpr (std::is_same_v<T, float>)
    if (use_avx512<T>()) return avx512::plane_moments(x, n, ahead, sum, m2);
#endif
  sum = plane_sum(x, n);
  m2 = plane_centered_sq(x, n, sum / static_cast<double>(n));
}

// y = x * scale + shift (+ residual) (then max(., 0))
template <class T>
void plane_output(const T* x, const T* res, bool relu, T scale, T shift, T* y, int64_t n) {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if constexpr (std::is_same_v<T, float>)
    if (use_avx512<T>()) return avx512::plane_output(x, res, relu, scale, shift, y, n);
#endif
  OutPlane<T> o(y, n);
  o = Plane<T>(x, n) * scale + shift;
  if (res != nullptr) o += Plane<T>(res, n);
  if (relu) o = o.max(T(0));
}

// Adds the sums of g and g * (x - mean), g = gy where the fused ReLU's output y is positive (gy itself when y
// is null); g is also written to masked when that is not null. The generic form needs masked whenever y is
// given (it sums the masked plane from there).
template <class T>
void plane_grad_sums_masked(const T* gy, const T* y, const T* x, T* masked, int64_t n,
                            [[maybe_unused]] int64_t ahead, double mean, double& sum_g, double& sum_gx) {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if constexpr (std::is_same_v<T, float>)
    if (use_avx512<T>()) return avx512::plane_grad_sums(gy, y, x, masked, n, ahead, mean, sum_g, sum_gx);
#endif
  if (y != nullptr) {
    OutPlane<T>(masked, n) = (Plane<T>(y, n) > T(0)).select(Plane<T>(gy, n), T(0));
  } else if (masked != nullptr) {
    std::memcpy(masked, gy, static_cast<size_t>(n) * sizeof(T));
  }
  plane_grad_sums(masked != nullptr ? masked : gy, x, n, mean, sum_g, sum_gx);
}

// gx = g * a + (x - mean) * bx + c0, g as in plane_grad_sums_masked (the generic form takes g masked
// already: y null).
template <class T>
void plane_grad_input(const T* g, const T* y, const T* x, T mean, T a, T bx, T c0, T* gx, int64_t n) {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if constexpr (std::is_same_v<T, float>)
    if (use_avx512<T>()) return avx512::plane_grad_input(g, y, x, mean, a, bx, c0, gx, n);
#endif
  OutPlane<T>(gx, n) = Plane<T>(g, n) * a + (Plane<T>(x, n) - mean) * bx + c0;
}

// Calls fn(channel index in [0, hi - lo), element offset of the plane, distance to the next plane's offset, 0
// for the last) for the planes of channels [lo, hi), image by image.
template <class Fn>
void for_planes(int64_t batch, int64_t channels, int64_t hw, int64_t lo, int64_t hi, Fn&& fn) {
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = lo; c < hi; ++c)
      fn(c - lo, (n * channels + c) * hw,
         c + 1 < hi      ? hw
         : n + 1 < batch ? (channels - hi + lo + 1) * hw
                         : 0);
}

// Channels per group: a group's planes are read again by the second pass, so one tensor's share of them
// (3 tensors in the backward sums) should stay in L2 (2 MiB per core on the development VM). At 28x28,
// batch 128, that is one channel at a time.
int64_t group_channels(int64_t batch, int64_t hw, size_t elem) {
  constexpr int64_t kBudgetBytes = 384 * 1024;
  return std::max<int64_t>(1, kBudgetBytes / std::max<int64_t>(1, batch * hw * static_cast<int64_t>(elem)));
}
}  // namespace

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double momentum, double eps,
                        const BnEpilogue& epilogue, const Tensor& y, const Tensor& save_mean,
                        const Tensor& save_invstd) {
  dispatch_float(x.dtype(), "batch_norm2d", [&](auto tag) {
    using T = decltype(tag);  // weight, running stats and saved stats share x's dtype on the CPU
    const int64_t batch = x.size(0), channels = x.size(1), hw = x.size(2) * x.size(3);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const T* w = weight.data<T>();
    const T* b = bias.data<T>();
    T* rm = running_mean.defined() ? running_mean.data<T>() : nullptr;
    T* rv = running_var.defined() ? running_var.data<T>() : nullptr;
    T* sm = save_mean.data<T>();
    T* si = save_invstd.data<T>();
    const T* res = epilogue.residual.defined() ? epilogue.residual.data<T>() : nullptr;
    const bool relu = epilogue.relu;
    const double count = static_cast<double>(batch * hw);
    const int64_t group = group_channels(batch, hw, sizeof(T));
    parallel_for(0, channels, 1, [&](int64_t lo_all, int64_t hi_all) {
      for (int64_t lo = lo_all; lo < hi_all; lo += group) {
        const int64_t hi = std::min(hi_all, lo + group);
        const size_t nc = static_cast<size_t>(hi - lo);
        std::vector<double> mean(nc, 0.0), m2(nc, 0.0);
        if (training) {
          // Chan's update: after k planes of hw values, mean and m2 (sum of squares about it) of all k*hw.
          std::vector<double> planes(nc, 0.0);
          for_planes(batch, channels, hw, lo, hi, [&](int64_t c, int64_t at, int64_t ahead) {
            double sum, sq;
            plane_moments(in + at, hw, ahead, sum, sq);
            double& k = planes[static_cast<size_t>(c)];
            const double delta = sum / static_cast<double>(hw) - mean[static_cast<size_t>(c)];
            mean[static_cast<size_t>(c)] += delta / (k + 1.0);
            m2[static_cast<size_t>(c)] += sq + delta * delta * static_cast<double>(hw) * k / (k + 1.0);
            k += 1.0;
          });
        }
        std::vector<T> scale(nc), shift(nc);
        for (int64_t c = lo; c < hi; ++c) {
          const size_t j = static_cast<size_t>(c - lo);
          double var;
          if (training) {
            var = m2[j] / count;
            if (rm) {
              rm[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rm[c]) + momentum * mean[j]);
              rv[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rv[c]) +
                                     momentum * var * count / (count - 1.0));
            }
          } else {
            mean[j] = static_cast<double>(rm[c]);
            var = static_cast<double>(rv[c]);
          }
          const double invstd = 1.0 / std::sqrt(var + eps);
          sm[c] = static_cast<T>(mean[j]);
          si[c] = static_cast<T>(invstd);
          const double s = static_cast<double>(w[c]) * invstd;
          scale[j] = static_cast<T>(s);
          shift[j] = static_cast<T>(static_cast<double>(b[c]) - mean[j] * s);
        }
        for_planes(batch, channels, hw, lo, hi, [&](int64_t c, int64_t at, int64_t) {
          plane_output(in + at, res != nullptr ? res + at : nullptr, relu, scale[static_cast<size_t>(c)],
                       shift[static_cast<size_t>(c)], out + at, hw);
        });
      }
    });
  });
}

void batch_norm_backward(const Tensor& x, const Tensor& grad_y, const Tensor& weight, const Tensor& /*bias*/,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training,
                         const Tensor& y_relu, double relu_cap, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_residual) {
  // Only CUDA defers the normalize pass, so only CUDA folds a ReLU6 (fusion.cpp).
  LIFTOFF_CHECK(relu_cap == kNoReluCap, BackendError,
                "batch_norm2d backward: a capped ReLU epilogue is CUDA-only (the CPU path is never fused)");
  dispatch_float(x.dtype(), "batch_norm2d backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t batch = x.size(0), channels = x.size(1), hw = x.size(2) * x.size(3);
    const T* in = x.data<T>();
    // A fused ReLU passes gradients where its output was positive. The masked gradient is written into
    // grad_residual when the residual wants it; the generic kernels also need it in a buffer otherwise, the
    // AVX-512 ones mask gy again in the gx pass instead.
    const T* gy_in = grad_y.data<T>();
    const T* yr = y_relu.defined() ? y_relu.data<T>() : nullptr;
    Tensor masked = grad_residual;
    if (yr != nullptr && !masked.defined() && !use_avx512<T>())
      masked = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device());
    T* mk = masked.defined() ? masked.data<T>() : nullptr;
    // The gx pass reads the masked gradient where it was written, else gy (masked by yr when fused).
    const T* g = mk != nullptr ? mk : gy_in;
    const T* g_mask = mk != nullptr ? nullptr : yr;
    const T* w = weight.data<T>();
    const T* sm = save_mean.data<T>();
    const T* si = save_invstd.data<T>();
    T* gx = grad_x.defined() ? grad_x.data<T>() : nullptr;
    T* gw = grad_weight.defined() ? grad_weight.data<T>() : nullptr;
    T* gb = grad_bias.defined() ? grad_bias.data<T>() : nullptr;
    const double count = static_cast<double>(batch * hw);
    const int64_t group = group_channels(batch, hw, sizeof(T));
    parallel_for(0, channels, 1, [&](int64_t lo_all, int64_t hi_all) {
      for (int64_t lo = lo_all; lo < hi_all; lo += group) {
        const int64_t hi = std::min(hi_all, lo + group);
        const size_t nc = static_cast<size_t>(hi - lo);
        std::vector<double> sum_dy(nc, 0.0), sum_dy_xmu(nc, 0.0);
        for_planes(batch, channels, hw, lo, hi, [&](int64_t c, int64_t at, int64_t ahead) {
          const size_t j = static_cast<size_t>(c);
          plane_grad_sums_masked(gy_in + at, yr != nullptr ? yr + at : nullptr, in + at,
                                 mk != nullptr ? mk + at : nullptr, hw, ahead,
                                 static_cast<double>(sm[lo + c]), sum_dy[j], sum_dy_xmu[j]);
        });
        // Training: gx = w * invstd * (gy - mean(gy) - xhat * mean(gy * xhat)); eval: the statistics are
        // constants. gx = k1 * gy - k1 * k3 * (x - mean) - k1 * k2, centred on the saved mean (exact in T).
        std::vector<T> a(nc), bx(nc), c0(nc);
        for (int64_t c = lo; c < hi; ++c) {
          const size_t j = static_cast<size_t>(c - lo);
          const double invstd = static_cast<double>(si[c]);
          if (gw) gw[c] = static_cast<T>(sum_dy_xmu[j] * invstd);
          if (gb) gb[c] = static_cast<T>(sum_dy[j]);
          const double k1 = static_cast<double>(w[c]) * invstd;
          const double k2 = training ? sum_dy[j] / count : 0.0;
          const double k3 = training ? invstd * invstd * sum_dy_xmu[j] / count : 0.0;
          a[j] = static_cast<T>(k1);
          bx[j] = static_cast<T>(-k1 * k3);
          c0[j] = static_cast<T>(-k1 * k2);
        }
        if (!gx) continue;
        for_planes(batch, channels, hw, lo, hi, [&](int64_t c, int64_t at, int64_t) {
          const size_t j = static_cast<size_t>(c);
          plane_grad_input(g + at, g_mask != nullptr ? g_mask + at : nullptr, in + at, sm[lo + c], a[j],
                           bx[j], c0[j], gx + at, hw);
        });
      }
    });
  });
}

}  // namespace liftoff::cpu
