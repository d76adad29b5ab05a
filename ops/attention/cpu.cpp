#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/attention/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
// Rows per parallel chunk: about 2^14 elements of work.
int64_t row_grain(int64_t s) {
  return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(s, 1));
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Row r of scores + mask in f64, -inf where masked (causal or mask) into x.
template <class T>
void masked_row(const T* scores, const AttentionMask& mask, const AttentionRows& rows, int64_t r,
                std::vector<double>& x) {
  const int64_t i = r % rows.l;
  const int64_t moff = mask.kind == AttentionMask::kNone ? 0 : mask.row_offset(r / rows.l, i);
  for (int64_t j = 0; j < rows.s; ++j) {
    double v = static_cast<double>(scores[j]);
    if (rows.causal && j > i) v = kNegInf;
    if (mask.kind == AttentionMask::kBool &&
        !static_cast<const uint8_t*>(mask.data)[moff + j * mask.stride_s])
      v = kNegInf;
    if (mask.kind == AttentionMask::kAdditive)
      v += static_cast<double>(static_cast<const T*>(mask.data)[moff + j * mask.stride_s]);
    x[static_cast<size_t>(j)] = v;
  }
}
}  // namespace

void attention_softmax_forward(const Tensor& scores, const Tensor& dropped, const AttentionMask& mask,
                               const AttentionRows& rows) {
  dispatch_float(scores.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    T* p = scores.data<T>();
    T* pd = dropped.defined() ? dropped.data<T>() : nullptr;
    const double keep_scale = rows.dropout_p < 1.0 ? 1.0 / (1.0 - rows.dropout_p) : 0.0;
    const float threshold = static_cast<float>(rows.dropout_p);
    parallel_for(0, rows.rows, row_grain(rows.s), [&](int64_t lo, int64_t hi) {
      std::vector<double> x(static_cast<size_t>(rows.s));
      for (int64_t r = lo; r < hi; ++r) {
        T* row = p + r * rows.s;
        masked_row(row, mask, rows, r, x);
        const double m = rows.s == 0 ? kNegInf : *std::max_element(x.begin(), x.end());
        double sum = 0;
        for (double& v : x) sum += (v = m == kNegInf ? 0.0 : std::exp(v - m));
        for (int64_t j = 0; j < rows.s; ++j) {
          const double prob = sum > 0 ? x[static_cast<size_t>(j)] / sum : 0.0;
          row[j] = static_cast<T>(prob);
          if (pd) {
            const bool keep = attention_keep(rows.draw, static_cast<uint64_t>(r * rows.s + j), threshold);
            pd[r * rows.s + j] = static_cast<T>(keep ? prob * keep_scale : 0.0);
          }
        }
      }
    });
  });
}

void attention_softmax_backward(const Tensor& probs, const Tensor& grad, const AttentionRows& rows) {
  dispatch_float(probs.dtype(), "scaled_dot_product_attention backward", [&](auto tag) {
    using T = decltype(tag);
    const T* p = probs.data<T>();
    T* g = grad.data<T>();
    const bool dropout = rows.dropout_p > 0.0;
    const double keep_scale = rows.dropout_p < 1.0 ? 1.0 / (1.0 - rows.dropout_p) : 0.0;
    const float threshold = static_cast<float>(rows.dropout_p);
    parallel_for(0, rows.rows, row_grain(rows.s), [&](int64_t lo, int64_t hi) {
      std::vector<double> dp(static_cast<size_t>(rows.s));
      for (int64_t r = lo; r < hi; ++r) {
        const T* pr = p + r * rows.s;
        T* gr = g + r * rows.s;
        double dot = 0;
        for (int64_t j = 0; j < rows.s; ++j) {
          double d = static_cast<double>(gr[j]);
          if (dropout)
            d = attention_keep(rows.draw, static_cast<uint64_t>(r * rows.s + j), threshold) ? d * keep_scale
                                                                                            : 0.0;
          dp[static_cast<size_t>(j)] = d;
          dot += d * static_cast<double>(pr[j]);
        }
        for (int64_t j = 0; j < rows.s; ++j)
          gr[j] = static_cast<T>(static_cast<double>(pr[j]) * (dp[static_cast<size_t>(j)] - dot));
      }
    });
  });
}

}  // namespace liftoff::cpu
