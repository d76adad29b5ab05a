#include "tests/common/gradcheck.h"

#include <cmath>

#include "runtime/random.h"

namespace liftoff::testing {

Tensor random_tensor(const Shape& shape, uint64_t seed, double low, double high, DType dtype, Device device) {
  Generator gen(seed);
  return rand_uniform(shape, gen, low, high, dtype, device);
}

::testing::AssertionResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                     const GradcheckOptions& options) {
  const GradcheckResult result = liftoff::gradcheck(fn, inputs, options);
  if (!result) return ::testing::AssertionFailure() << result.message;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(actual.shape()) << " vs expected " << shape_str(expected.shape());
  }
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = atol + rtol * std::abs(e[i]);
    if (!(std::abs(a[i] - e[i]) <= tol)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " vs expected " << e[i] << " (tolerance " << tol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace liftoff::testing
