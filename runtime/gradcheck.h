// Gradient checking for ops and modules: the analytic gradients backward() produces against central
// differences, in f64 on the CPU. Every op and layer test of Liftoff uses it (through the GoogleTest adapter
// in tests/common/gradcheck.h), and so can an op written outside the library (examples/custom_op).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

struct GradcheckOptions {
  double eps = 1e-6;  // central-difference step
  double atol = 1e-6;
  double rtol = 1e-5;
  // Inputs whose gradient is checked; empty means every input that requires grad.
  std::vector<size_t> check_inputs;
};

// passed, or a message listing the first mismatching elements (analytic vs numeric) or the misuse.
struct GradcheckResult {
  bool passed = true;
  std::string message;
  explicit operator bool() const { return passed; }
};

using DifferentiableFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Compares d(sum(r * fn(inputs)))/d(input) for a fixed random r in [0.5, 1.5) against central differences
// (fn evaluated twice per element under NoGradGuard, so cost grows with the number of input elements: keep
// inputs small). Requires: every checked input is a contiguous f64 CPU tensor that requires grad; fn is
// deterministic (seed any randomness inside fn). Ensures: the checked inputs' values are restored and their
// .grad holds the analytic gradient; an element passes when |analytic - numeric| <= atol + rtol * |numeric|.
GradcheckResult gradcheck(const DifferentiableFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

// max over elements of |actual - expected| / (atol + rtol * |expected|), both read as f64 on the host (so
// it synchronises with the device): <= 1 means "close". NaN matches NaN; NaN against a number gives infinity.
// Requires equal element counts (ShapeError otherwise).
double closeness(const Tensor& actual, const Tensor& expected, double atol, double rtol);

}  // namespace liftoff
