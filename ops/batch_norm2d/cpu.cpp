#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "ops/batch_norm2d/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
// Per-plane sums in double (as PyTorch's CPU kernel: gradient sums cancel to values far below their terms),
// in kLanes independent accumulators combined in a fixed order at the end: the lanes vectorise (float->double
// conversion, add, multiply-add on 4-wide double vectors) and break the add latency chain of a single
// accumulator. Planes are added in image order: the result does not depend on the thread count.
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
    parallel_for(0, channels, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        double mean, var;
        if (training) {
          double sum = 0.0;
          for (int64_t n = 0; n < batch; ++n) sum += plane_sum(in + (n * channels + c) * hw, hw);
          mean = sum / count;
          double sq = 0.0;  // two passes (the second reads planes still in cache): no cancellation
          for (int64_t n = 0; n < batch; ++n) sq += plane_centered_sq(in + (n * channels + c) * hw, hw, mean);
          var = sq / count;
          if (rm) {
            rm[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rm[c]) + momentum * mean);
            rv[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rv[c]) +
                                   momentum * var * count / (count - 1.0));
          }
        } else {
          mean = static_cast<double>(rm[c]);
          var = static_cast<double>(rv[c]);
        }
        const double invstd = 1.0 / std::sqrt(var + eps);
        sm[c] = static_cast<T>(mean);
        si[c] = static_cast<T>(invstd);
        const double scale = static_cast<double>(w[c]) * invstd;
        const T scale_t = static_cast<T>(scale);
        const T shift_t = static_cast<T>(static_cast<double>(b[c]) - mean * scale);
        for (int64_t n = 0; n < batch; ++n) {
          const int64_t base = (n * channels + c) * hw;
          OutPlane<T> o(out + base, hw);
          o = Plane<T>(in + base, hw) * scale_t + shift_t;
          if (res != nullptr) o += Plane<T>(res + base, hw);
          if (relu) o = o.max(T(0));
        }
      }
    });
  });
}

void batch_norm_backward(const Tensor& x, const Tensor& grad_y, const Tensor& weight, const Tensor& save_mean,
                         const Tensor& save_invstd, bool training, const Tensor& y_relu, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_residual) {
  dispatch_float(x.dtype(), "batch_norm2d backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t batch = x.size(0), channels = x.size(1), hw = x.size(2) * x.size(3);
    const T* in = x.data<T>();
    // A fused ReLU passes gradients where its output was positive: each plane is masked first (the residual's
    // gradient is that masked gradient), then the batch-norm backward as usual. The masked gradient is
    // written once, into grad_residual when the residual wants it, plane by plane inside the channel loop
    // (in parallel, and still in cache when the sums read it).
    const T* gy_in = grad_y.data<T>();
    const T* yr = y_relu.defined() ? y_relu.data<T>() : nullptr;
    Tensor masked = grad_residual;
    if (yr != nullptr && !masked.defined())
      masked = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device());
    T* mk = masked.defined() ? masked.data<T>() : nullptr;
    const T* gy = mk != nullptr ? mk : gy_in;
    const T* w = weight.data<T>();
    const T* sm = save_mean.data<T>();
    const T* si = save_invstd.data<T>();
    T* gx = grad_x.defined() ? grad_x.data<T>() : nullptr;
    T* gw = grad_weight.defined() ? grad_weight.data<T>() : nullptr;
    T* gb = grad_bias.defined() ? grad_bias.data<T>() : nullptr;
    const double count = static_cast<double>(batch * hw);
    parallel_for(0, channels, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        const double mean = static_cast<double>(sm[c]);
        const double invstd = static_cast<double>(si[c]);
        const T mean_t = static_cast<T>(mean);  // save_mean is already of type T
        double sum_dy = 0.0, sum_dy_xmu = 0.0;
        for (int64_t n = 0; n < batch; ++n) {
          const int64_t base = (n * channels + c) * hw;
          if (yr != nullptr) {
            OutPlane<T>(mk + base, hw) =
                (Plane<T>(yr + base, hw) > T(0)).select(Plane<T>(gy_in + base, hw), T(0));
          } else if (mk != nullptr) {
            std::memcpy(mk + base, gy_in + base, static_cast<size_t>(hw) * sizeof(T));
          }
          plane_grad_sums(gy + base, in + base, hw, mean, sum_dy, sum_dy_xmu);
        }
        if (gw) gw[c] = static_cast<T>(sum_dy_xmu * invstd);
        if (gb) gb[c] = static_cast<T>(sum_dy);
        if (!gx) continue;
        // Training: gx = w * invstd * (gy - mean(gy) - xhat * mean(gy * xhat)); eval: the statistics are
        // constants.
        // gx = k1 * gy - k1 * k3 * (x - mean) - k1 * k2, centred on the saved mean (exact in T).
        const double k1 = static_cast<double>(w[c]) * invstd;
        const double k2 = training ? sum_dy / count : 0.0;
        const double k3 = training ? invstd * invstd * sum_dy_xmu / count : 0.0;
        const T a = static_cast<T>(k1);
        const T bx = static_cast<T>(-k1 * k3);
        const T c0 = static_cast<T>(-k1 * k2);
        for (int64_t n = 0; n < batch; ++n) {
          const int64_t base = (n * channels + c) * hw;
          OutPlane<T>(gx + base, hw) =
              Plane<T>(gy + base, hw) * a + (Plane<T>(in + base, hw) - mean_t) * bx + c0;
        }
      }
    });
  });
}

}  // namespace liftoff::cpu
