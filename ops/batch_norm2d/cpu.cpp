#include <cmath>

#include "ops/batch_norm2d/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double momentum, double eps,
                        const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd) {
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
    const double count = static_cast<double>(batch * hw);
    parallel_for(0, channels, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        double mean, var;
        if (training) {
          double sum = 0.0;
          for (int64_t n = 0; n < batch; ++n) {
            const T* plane = in + (n * channels + c) * hw;
            for (int64_t k = 0; k < hw; ++k) sum += static_cast<double>(plane[k]);
          }
          mean = sum / count;
          double sq = 0.0;  // two passes: no cancellation for large means
          for (int64_t n = 0; n < batch; ++n) {
            const T* plane = in + (n * channels + c) * hw;
            for (int64_t k = 0; k < hw; ++k) {
              const double d = static_cast<double>(plane[k]) - mean;
              sq += d * d;
            }
          }
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
        const double shift = static_cast<double>(b[c]) - mean * scale;
        for (int64_t n = 0; n < batch; ++n) {
          const T* plane = in + (n * channels + c) * hw;
          T* dst = out + (n * channels + c) * hw;
          for (int64_t k = 0; k < hw; ++k)
            dst[k] = static_cast<T>(static_cast<double>(plane[k]) * scale + shift);
        }
      }
    });
  });
}

void batch_norm_backward(const Tensor& x, const Tensor& grad_y, const Tensor& weight, const Tensor& save_mean,
                         const Tensor& save_invstd, bool training, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias) {
  dispatch_float(x.dtype(), "batch_norm2d backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t batch = x.size(0), channels = x.size(1), hw = x.size(2) * x.size(3);
    const T* in = x.data<T>();
    const T* gy = grad_y.data<T>();
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
        double sum_dy = 0.0, sum_dy_xmu = 0.0;
        for (int64_t n = 0; n < batch; ++n) {
          const int64_t base = (n * channels + c) * hw;
          for (int64_t k = 0; k < hw; ++k) {
            const double g = static_cast<double>(gy[base + k]);
            sum_dy += g;
            sum_dy_xmu += g * (static_cast<double>(in[base + k]) - mean);
          }
        }
        if (gw) gw[c] = static_cast<T>(sum_dy_xmu * invstd);
        if (gb) gb[c] = static_cast<T>(sum_dy);
        if (!gx) continue;
        // Training: gx = w * invstd * (gy - mean(gy) - xhat * mean(gy * xhat)); eval: the statistics are
        // constants.
        const double k1 = static_cast<double>(w[c]) * invstd;
        const double k2 = training ? sum_dy / count : 0.0;
        const double k3 = training ? invstd * invstd * sum_dy_xmu / count : 0.0;
        for (int64_t n = 0; n < batch; ++n) {
          const int64_t base = (n * channels + c) * hw;
          for (int64_t k = 0; k < hw; ++k) {
            const double xmu = static_cast<double>(in[base + k]) - mean;
            gx[base + k] = static_cast<T>(k1 * (static_cast<double>(gy[base + k]) - k2 - xmu * k3));
          }
        }
      }
    });
  });
}

}  // namespace liftoff::cpu
