// Helpers for the shape/indexing op tests: counting tensors and error-message checks.
#pragma once
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff::testing {

// 0, 1, 2, ... in `shape` (row-major) as `dtype` on the CPU.
inline Tensor arange(const Shape& shape, DType dtype = DType::f64) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  return Tensor::from_vector(v, shape).to(dtype);
}

inline std::vector<double> values(const Tensor& t) {
  return t.to_vector<double>();
}

inline Tensor i64(const std::vector<int64_t>& v, const Shape& shape, Device device = Device::cpu()) {
  return Tensor::from_vector(v, shape, device);
}

// fn throws E and its message contains every one of `parts` (op name, shapes).
template <class E, class Fn>
::testing::AssertionResult throws_naming(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& p : parts) {
      if (what.find(p) == std::string::npos) {
        return ::testing::AssertionFailure() << "message '" << what << "' does not mention '" << p << "'";
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another error: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace liftoff::testing
