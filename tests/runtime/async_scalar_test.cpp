#include "runtime/async_scalar.h"

#include <gtest/gtest.h>

namespace liftoff {
namespace {

TEST(AsyncScalar, NothingBeforeTheFirstPost) {
  AsyncScalar reader;
  double v = -1.0;
  EXPECT_FALSE(reader.latest(&v));
  EXPECT_EQ(v, -1.0);
}

TEST(AsyncScalar, CpuValuesArriveAtOnceAndScaled) {
  AsyncScalar reader;
  reader.post(Tensor::full({}, 6.0), 0.5);
  double v = 0.0;
  ASSERT_TRUE(reader.latest(&v));
  EXPECT_EQ(v, 3.0);
  EXPECT_THROW(reader.post(Tensor::full({2}, 1.0)), ValueError);
}

}  // namespace
}  // namespace liftoff
