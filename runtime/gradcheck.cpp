#include "runtime/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "runtime/autograd.h"
#include "runtime/random.h"

namespace liftoff {

namespace {
double weighted_sum(const Tensor& out, const Tensor& weights) {
  const std::vector<double> o = out.to_vector<double>();
  const std::vector<double> w = weights.to_vector<double>();
  double total = 0.0;
  for (size_t i = 0; i < o.size(); ++i) total += o[i] * w[i];
  return total;
}

GradcheckResult failure(const std::string& message) {
  return GradcheckResult{false, message};
}
}  // namespace

GradcheckResult gradcheck(const DifferentiableFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  std::vector<size_t> checked = options.check_inputs;
  if (checked.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined() && inputs[i].requires_grad()) checked.push_back(i);
    }
  }
  for (size_t i : checked) {
    if (i >= inputs.size()) return failure(str_cat("gradcheck: input ", i, " does not exist"));
    const Tensor& t = inputs[i];
    if (!t.defined() || t.dtype() != DType::f64 || !t.device().is_cpu() || !t.is_contiguous() ||
        !t.requires_grad()) {
      return failure(
          str_cat("gradcheck: input ", i, " must be a contiguous f64 CPU tensor that requires grad"));
    }
    t.set_grad(Tensor());
  }
  const Tensor out = fn(inputs);
  // A fixed seed: the check is reproducible, and r weighs every output element differently.
  Generator weights_gen(12345);
  const Tensor weights = rand_uniform(out.shape(), weights_gen, 0.5, 1.5, DType::f64);
  out.backward(weights);

  std::ostringstream failures;
  int failed = 0;
  for (size_t i : checked) {
    const Tensor& t = inputs[i];
    const Tensor analytic = t.grad();
    if (!analytic.defined()) return failure(str_cat("gradcheck: input ", i, " got no gradient"));
    const std::vector<double> a = analytic.to_vector<double>();
    double* data = t.data<double>();
    for (int64_t j = 0; j < t.numel(); ++j) {
      const double saved = data[j];
      double plus, minus;
      {
        NoGradGuard no_grad;
        data[j] = saved + options.eps;
        plus = weighted_sum(fn(inputs), weights);
        data[j] = saved - options.eps;
        minus = weighted_sum(fn(inputs), weights);
        data[j] = saved;
      }
      const double numeric = (plus - minus) / (2 * options.eps);
      const double error = std::abs(a[static_cast<size_t>(j)] - numeric);
      if (error > options.atol + options.rtol * std::abs(numeric) && failed < 10) {
        ++failed;
        failures << "\n  input " << i << " element " << j << ": analytic " << a[static_cast<size_t>(j)]
                 << " numeric " << numeric;
      }
    }
  }
  if (failed) return failure("gradient mismatch:" + failures.str());
  return GradcheckResult{};
}

double closeness(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  LIFTOFF_CHECK(actual.numel() == expected.numel(), ShapeError, "closeness: ", shape_str(actual.shape()),
                " vs ", shape_str(expected.shape()), " hold different element counts");
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(e[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(a[i] - e[i]) / (atol + rtol * std::abs(e[i])));
  }
  return worst;
}

}  // namespace liftoff
