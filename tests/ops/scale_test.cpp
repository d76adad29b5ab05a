#include "ops/scale/scale.h"

#include <gtest/gtest.h>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Scale, Forward) {
  const Tensor x = Tensor::from_vector<float>({1.f, -2.f, 0.25f}, {3});
  EXPECT_EQ(scale(x, 2.0).to_vector<float>(), (std::vector<float>{2.f, -4.f, 0.5f}));
  EXPECT_EQ((x * -0.5).to_vector<float>(), (std::vector<float>{-0.5f, 1.f, -0.125f}));
  EXPECT_EQ((4.0 * x).to_vector<float>(), (std::vector<float>{4.f, -8.f, 1.f}));
}

TEST(Scale, Gradcheck) {
  const Tensor x = testing::random_tensor({2, 3, 4}, 5).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return scale(in[0], -1.75); }, {x}));
}

TEST(Scale, BackwardScalesGradient) {
  const Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad(true);
  scale(x, 0.25).backward(Tensor::from_vector<double>({4, 8}, {2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 2}));
}

TEST(Scale, RejectsIntegerInput) {
  EXPECT_THROW(scale(Tensor::zeros({2}, DType::i32), 2.0), DTypeError);
  EXPECT_THROW(scale(Tensor(), 2.0), ValueError);
}

}  // namespace
}  // namespace liftoff
