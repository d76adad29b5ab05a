#include <gtest/gtest.h>

#include "runtime/async_scalar.h"
#include "runtime/device.h"
#include "tests/common/cuda_test.h"

namespace liftoff {
namespace {

TEST(AsyncScalarCuda, ArrivesWithoutBlockingAndKeepsTheNewest) {
  LIFTOFF_REQUIRE_CUDA();
  AsyncScalar reader;
  const Tensor value = Tensor::full({}, 10.0, DType::f32, Device::cuda(0));
  reader.post(value, 0.1);
  synchronize(Device::cuda(0));
  double v = 0.0;
  ASSERT_TRUE(reader.latest(&v));
  EXPECT_DOUBLE_EQ(v, 1.0);
  value.fill_(20.0);  // ordered after the first copy on the compute stream
  reader.post(value, 0.1);
  synchronize(Device::cuda(0));
  ASSERT_TRUE(reader.latest(&v));
  EXPECT_DOUBLE_EQ(v, 2.0);
}

}  // namespace
}  // namespace liftoff
