// CPU layer/group norm: the reference. Statistics and sums in double for every dtype (two passes over a
// row: mean, then the centred variance), rows split across the thread pool; the weight/bias gradients from
// fixed row chunks summed in chunk order (deterministic for a given thread count).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/layer_norm/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
// The affine parameter of value `col` of row `row`.
inline int64_t affine_index(int64_t row, int64_t col, const RowNormShape& s) {
  return (row % s.groups) * s.affine_per_group() + col / s.inner;
}

int64_t grain_for(int64_t cols) {
  return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(cols, 1));
}

template <class T>
void forward_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                  const Tensor& mean, const Tensor& rstd, const RowNormShape& s) {
  const T* xd = x.data<T>();
  const T* wd = weight.defined() ? weight.data<T>() : nullptr;
  const T* bd = bias.defined() ? bias.data<T>() : nullptr;
  T* yd = y.data<T>();
  T* md = mean.data<T>();
  T* rd = rstd.data<T>();
  parallel_for(0, s.rows, grain_for(s.cols), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const T* xr = xd + row * s.cols;
      double sum = 0.0;
      for (int64_t j = 0; j < s.cols; ++j) sum += static_cast<double>(xr[j]);
      const double mu = s.cols > 0 ? sum / static_cast<double>(s.cols) : 0.0;
      double sq = 0.0;
      for (int64_t j = 0; j < s.cols; ++j) {
        const double d = static_cast<double>(xr[j]) - mu;
        sq += d * d;
      }
      const double var = s.cols > 0 ? sq / static_cast<double>(s.cols) : 0.0;  // biased, as PyTorch
      const double r = 1.0 / std::sqrt(var + s.eps);
      md[row] = static_cast<T>(mu);
      rd[row] = static_cast<T>(r);
      for (int64_t j = 0; j < s.cols; ++j) {
        const int64_t a = affine_index(row, j, s);
        double v = (static_cast<double>(xr[j]) - mu) * r;
        if (wd) v *= static_cast<double>(wd[a]);
        if (bd) v += static_cast<double>(bd[a]);
        yd[row * s.cols + j] = static_cast<T>(v);
      }
    }
  });
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gy * weight, per row.
template <class T>
void input_grad(const T* gy, const T* x, const T* mean, const T* rstd, const T* w, T* gx,
                const RowNormShape& s) {
  parallel_for(0, s.rows, grain_for(s.cols), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const double mu = static_cast<double>(mean[row]), r = static_cast<double>(rstd[row]);
      const int64_t base = row * s.cols;
      auto grad = [&](int64_t j) {  // gy * weight
        const double g = static_cast<double>(gy[base + j]);
        return w ? g * static_cast<double>(w[affine_index(row, j, s)]) : g;
      };
      auto xhat = [&](int64_t j) { return (static_cast<double>(x[base + j]) - mu) * r; };
      double sum_g = 0.0, sum_gx = 0.0;
      for (int64_t j = 0; j < s.cols; ++j) {
        sum_g += grad(j);
        sum_gx += grad(j) * xhat(j);
      }
      const double n = static_cast<double>(s.cols);
      for (int64_t j = 0; j < s.cols; ++j)
        gx[base + j] = static_cast<T>(r * (grad(j) - sum_g / n - xhat(j) * sum_gx / n));
    }
  });
}

// gw[a] = sum gy * xhat and gb[a] = sum gy over the values of parameter a.
template <class T>
void affine_grad(const T* gy, const T* x, const T* mean, const T* rstd, T* gw, T* gb, const RowNormShape& s) {
  const int64_t size = s.affine_size();
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(s.rows, num_threads()));
  std::vector<double> parts(static_cast<size_t>(chunks * 2 * size), 0.0);
  parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t chunk = lo; chunk < hi; ++chunk) {
      double* pw = parts.data() + chunk * 2 * size;
      double* pb = pw + size;
      for (int64_t row = s.rows * chunk / chunks; row < s.rows * (chunk + 1) / chunks; ++row) {
        const double mu = static_cast<double>(mean[row]), r = static_cast<double>(rstd[row]);
        for (int64_t j = 0; j < s.cols; ++j) {
          const int64_t a = affine_index(row, j, s);
          const double g = static_cast<double>(gy[row * s.cols + j]);
          pw[a] += g * (static_cast<double>(x[row * s.cols + j]) - mu) * r;
          pb[a] += g;
        }
      }
    }
  });
  for (int64_t a = 0; a < size; ++a) {
    double sw = 0.0, sb = 0.0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      sw += parts[static_cast<size_t>(chunk * 2 * size + a)];
      sb += parts[static_cast<size_t>(chunk * 2 * size + size + a)];
    }
    if (gw) gw[a] = static_cast<T>(sw);
    if (gb) gb[a] = static_cast<T>(sb);
  }
}
}  // namespace

void row_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd, const RowNormShape& s) {
  dispatch_float(x.dtype(), "layer/group norm",
                 [&](auto tag) { forward_impl<decltype(tag)>(x, weight, bias, y, mean, rstd, s); });
}

void row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                       const Tensor& weight, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                       const RowNormShape& s) {
  dispatch_float(gy.dtype(), "layer/group norm backward", [&](auto tag) {
    using T = decltype(tag);
    if (gx.defined())
      input_grad<T>(gy.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(),
                    weight.defined() ? weight.data<T>() : nullptr, gx.data<T>(), s);
    if (gw.defined() || gb.defined())
      affine_grad<T>(gy.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(),
                     gw.defined() ? gw.data<T>() : nullptr, gb.defined() ? gb.data<T>() : nullptr, s);
  });
}

}  // namespace liftoff::cpu
