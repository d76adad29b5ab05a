// The table of unary ops shared by unary_test.cpp (CPU) and unary_cuda.cpp (parity): each op with an
// independent f64 reference written with std:: math, the input range the tests sample, and its kinks.
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/unary/unary.h"
#include "tests/common/gradcheck.h"

namespace liftoff::testing {

struct UnaryCase {
  std::string name;  // also the GoogleTest parameter name
  std::string api;   // the op's name in error messages
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;              // the sampled input range
  std::vector<double> kinks;  // points where the derivative jumps: samples keep away from them
};

inline double ref_sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
inline double ref_relu6(double x) {
  return std::min(std::max(x, 0.0), 6.0);
}
inline double ref_softplus(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log(1.0 + std::exp(beta * x)) / beta;
}

inline const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", "neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, -3, 3, {}},
      {"unary_minus", "neg", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, -3, 3, {}},
      {"abs",
       "abs",
       [](const Tensor& x) { return abs(x); },
       [](double x) { return std::fabs(x); },
       -3,
       3,
       {0}},
      {"exp", "exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -2, 2, {}},
      {"log",
       "log",
       [](const Tensor& x) { return log(x); },
       [](double x) { return std::log(x); },
       0.2,
       3,
       {}},
      {"sqrt",
       "sqrt",
       [](const Tensor& x) { return sqrt(x); },
       [](double x) { return std::sqrt(x); },
       0.2,
       3,
       {}},
      {"rsqrt",
       "rsqrt",
       [](const Tensor& x) { return rsqrt(x); },
       [](double x) { return 1.0 / std::sqrt(x); },
       0.2,
       3,
       {}},
      {"tanh",
       "tanh",
       [](const Tensor& x) { return tanh(x); },
       [](double x) { return std::tanh(x); },
       -3,
       3,
       {}},
      {"sigmoid", "sigmoid", [](const Tensor& x) { return sigmoid(x); }, ref_sigmoid, -5, 5, {}},
      {"relu6", "relu6", [](const Tensor& x) { return relu6(x); }, ref_relu6, -2, 8, {0, 6}},
      {"leaky_relu",
       "leaky_relu",
       [](const Tensor& x) { return leaky_relu(x); },
       [](double x) { return x > 0 ? x : 0.01 * x; },
       -3,
       3,
       {0}},
      {"leaky_relu_0_2",
       "leaky_relu",
       [](const Tensor& x) { return leaky_relu(x, 0.2); },
       [](double x) { return x > 0 ? x : 0.2 * x; },
       -3,
       3,
       {0}},
      {"gelu",
       "gelu",
       [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); },
       -4,
       4,
       {}},
      {"gelu_tanh",
       "gelu",
       [](const Tensor& x) { return gelu(x, "tanh"); },
       [](double x) {
         return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
       },
       -4,
       4,
       {}},
      {"silu",
       "silu",
       [](const Tensor& x) { return silu(x); },
       [](double x) { return x * ref_sigmoid(x); },
       -5,
       5,
       {}},
      {"softplus",
       "softplus",
       [](const Tensor& x) { return softplus(x); },
       [](double x) { return ref_softplus(x, 1.0, 20.0); },
       -5,
       5,
       {}},
      {"softplus_beta2_threshold3",
       "softplus",
       [](const Tensor& x) { return softplus(x, 2.0, 3.0); },
       [](double x) { return ref_softplus(x, 2.0, 3.0); },
       -3,
       3,
       {1.5}},
      {"hardsigmoid",
       "hardsigmoid",
       [](const Tensor& x) { return hardsigmoid(x); },
       [](double x) { return ref_relu6(x + 3.0) / 6.0; },
       -5,
       5,
       {-3, 3}},
      {"hardswish",
       "hardswish",
       [](const Tensor& x) { return hardswish(x); },
       [](double x) { return x * ref_relu6(x + 3.0) / 6.0; },
       -5,
       5,
       {-3, 3}},
      {"elu",
       "elu",
       [](const Tensor& x) { return elu(x); },
       [](double x) { return x > 0 ? x : std::exp(x) - 1.0; },
       -3,
       3,
       {}},
      {"elu_alpha1_5",
       "elu",
       [](const Tensor& x) { return elu(x, 1.5); },
       [](double x) { return x > 0 ? x : 1.5 * (std::exp(x) - 1.0); },
       -3,
       3,
       {0}},
      {"square",
       "square",
       [](const Tensor& x) { return square(x); },
       [](double x) { return x * x; },
       -3,
       3,
       {}},
      {"sin", "sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, -4, 4, {}},
      {"cos", "cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, -4, 4, {}},
      {"clamp",
       "clamp",
       [](const Tensor& x) { return clamp(x, -0.5, 1.0); },
       [](double x) { return std::min(std::max(x, -0.5), 1.0); },
       -2,
       2,
       {-0.5, 1.0}},
      {"clamp_min",
       "clamp",
       [](const Tensor& x) { return clamp(x, 0.3); },
       [](double x) { return std::max(x, 0.3); },
       -2,
       2,
       {0.3}},
      {"clamp_max",
       "clamp",
       [](const Tensor& x) { return clamp(x, std::nullopt, -0.2); },
       [](double x) { return std::min(x, -0.2); },
       -2,
       2,
       {-0.2}},
  };
  return cases;
}

inline std::string unary_case_name(const ::testing::TestParamInfo<size_t>& info) {
  return unary_cases()[info.param].name;
}

// f64 CPU values in [c.lo, c.hi) from a fixed seed, none within 0.05 of a kink (so a central difference never
// straddles one, and rounding to a 16-bit type cannot move a value across one).
inline Tensor unary_sample(const UnaryCase& c, const Shape& shape, uint64_t seed) {
  std::vector<double> values = random_tensor(shape, seed, c.lo, c.hi).to_vector<double>();
  for (double& v : values) {
    for (double k : c.kinks) {
      if (std::fabs(v - k) < 0.05) v = k + (v < k ? -0.1 : 0.1);
    }
  }
  return Tensor::from_vector<double>(values, shape);
}

}  // namespace liftoff::testing
