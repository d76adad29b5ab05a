// GoogleTest adapters around the library's gradient checker (runtime/gradcheck.h): every op and layer test
// checks analytic gradients against central differences in f64 on the CPU through testing::gradcheck.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "runtime/gradcheck.h"
#include "runtime/tensor.h"

namespace liftoff::testing {

using liftoff::closeness;
using liftoff::GradcheckOptions;
using TensorFn = DifferentiableFn;

// Random f64 tensor on the CPU with values in [low, high), from a fixed seed (never zeros).
Tensor random_tensor(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0,
                     DType dtype = DType::f64, Device device = Device::cpu());

// liftoff::gradcheck with its message as the assertion's failure message.
::testing::AssertionResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                     const GradcheckOptions& options = {});

// Every element within atol + rtol * |expected|; the failure names the first element that is not.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol, double rtol);

}  // namespace liftoff::testing
