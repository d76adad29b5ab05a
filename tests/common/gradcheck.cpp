#include "tests/common/gradcheck.h"

#include <cmath>
#include <sstream>

#include "runtime/autograd.h"
#include "runtime/random.h"

namespace liftoff::testing {

Tensor random_tensor(const Shape& shape, uint64_t seed, double low, double high, DType dtype, Device device) {
  Generator gen(seed);
  return rand_uniform(shape, gen, low, high, dtype, device);
}

namespace {
double weighted_sum(const Tensor& out, const Tensor& weights) {
  const std::vector<double> o = out.to_vector<double>();
  const std::vector<double> w = weights.to_vector<double>();
  double total = 0.0;
  for (size_t i = 0; i < o.size(); ++i) total += o[i] * w[i];
  return total;
}
}  // namespace

::testing::AssertionResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                     const GradcheckOptions& options) {
  std::vector<size_t> checked = options.check_inputs;
  if (checked.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined() && inputs[i].requires_grad()) checked.push_back(i);
    }
  }
  for (size_t i : checked) {
    const Tensor& t = inputs[i];
    if (t.dtype() != DType::f64 || !t.device().is_cpu() || !t.is_contiguous() || !t.requires_grad()) {
      return ::testing::AssertionFailure() << "gradcheck: input " << i
                                           << " must be a contiguous f64 CPU tensor that requires grad";
    }
    t.set_grad(Tensor());
  }
  const Tensor out = fn(inputs);
  const Tensor weights = random_tensor(out.shape(), 12345, 0.5, 1.5);
  out.backward(weights);

  std::ostringstream failures;
  int failed = 0;
  for (size_t i : checked) {
    const Tensor& t = inputs[i];
    const Tensor analytic = t.grad();
    if (!analytic.defined()) return ::testing::AssertionFailure() << "gradcheck: input " << i << " got no gradient";
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
  if (failed) return ::testing::AssertionFailure() << "gradient mismatch:" << failures.str();
  return ::testing::AssertionSuccess();
}

double closeness(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(e[i])) return INFINITY;
    worst = std::max(worst, std::abs(a[i] - e[i]) / (atol + rtol * std::abs(e[i])));
  }
  return worst;
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " vs expected "
                                         << shape_str(expected.shape());
  }
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = atol + rtol * std::abs(e[i]);
    if (!(std::abs(a[i] - e[i]) <= tol)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected " << e[i]
                                           << " (tolerance " << tol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace liftoff::testing
