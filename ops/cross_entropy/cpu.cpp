#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cross_entropy/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void cross_entropy_forward(const Tensor& logits, const Tensor& labels, double smoothing, const Tensor& loss,
                           const Tensor& lse) {
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* z = logits.data<T>();
    const int64_t* label = labels.data<int64_t>();
    T* row_lse = lse.data<T>();  // lse has the logits' dtype for f32 and f64
    const int64_t rows = logits.size(0);
    const int64_t classes = logits.size(1);
    const double on = 1.0 - smoothing;
    const double spread = smoothing / static_cast<double>(classes);
    std::vector<double> row_loss(static_cast<size_t>(rows));
    parallel_for(0, rows, std::max<int64_t>(1, 4096 / classes), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T* zi = z + i * classes;
        double max = static_cast<double>(zi[0]);
        for (int64_t j = 1; j < classes; ++j) max = std::max(max, static_cast<double>(zi[j]));
        double sum_exp = 0.0, sum_z = 0.0;
        for (int64_t j = 0; j < classes; ++j) {
          sum_exp += std::exp(static_cast<double>(zi[j]) - max);
          sum_z += static_cast<double>(zi[j]);
        }
        const double log_sum_exp = max + std::log(sum_exp);
        row_lse[i] = static_cast<T>(log_sum_exp);
        // -sum_j target_j * (z_j - lse) with sum_j target_j = 1.
        row_loss[static_cast<size_t>(i)] =
            log_sum_exp - on * static_cast<double>(zi[label[i]]) - spread * sum_z;
      }
    });
    double total = 0.0;
    for (double l : row_loss) total += l;
    loss.data<T>()[0] = static_cast<T>(total / static_cast<double>(rows));
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& lse,
                            const Tensor& grad_loss, double smoothing, const Tensor& grad_logits) {
  dispatch_float(logits.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = decltype(tag);
    const T* z = logits.data<T>();
    const int64_t* label = labels.data<int64_t>();
    const T* row_lse = lse.data<T>();
    T* gz = grad_logits.data<T>();
    const int64_t rows = logits.size(0);
    const int64_t classes = logits.size(1);
    const double scale = static_cast<double>(grad_loss.data<T>()[0]) / static_cast<double>(rows);
    const double on = 1.0 - smoothing;
    const double spread = smoothing / static_cast<double>(classes);
    parallel_for(0, rows, std::max<int64_t>(1, 4096 / classes), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        for (int64_t j = 0; j < classes; ++j) {
          const double p =
              std::exp(static_cast<double>(z[i * classes + j]) - static_cast<double>(row_lse[i]));
          const double target = spread + (j == label[i] ? on : 0.0);
          gz[i * classes + j] = static_cast<T>((p - target) * scale);
        }
      }
    });
  });
}

}  // namespace liftoff::cpu
