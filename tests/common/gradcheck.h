// The one gradient checker every op and layer test uses: analytic gradients from backward() against central
// differences, in f64 on the CPU. fn must be deterministic (seed any randomness inside it).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff::testing {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-5;
  // Inputs whose gradient is checked; empty means every input that requires grad.
  std::vector<size_t> check_inputs;
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Random f64 tensor on the CPU with values in [low, high), from a fixed seed (never zeros).
Tensor random_tensor(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0,
                     DType dtype = DType::f64, Device device = Device::cpu());

// Compares d(sum(r * fn(inputs)))/d(input) for a random r against central differences.
::testing::AssertionResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                     const GradcheckOptions& options = {});

// Max |a - b| / (atol + rtol * |b|) over elements: <= 1 means "close". Shapes must match.
double closeness(const Tensor& actual, const Tensor& expected, double atol, double rtol);
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol, double rtol);

}  // namespace liftoff::testing
