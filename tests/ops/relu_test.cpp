#include "ops/relu/relu.h"

#include <gtest/gtest.h>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Relu, Forward) {
  const Tensor x = Tensor::from_vector<float>({-2.f, -0.5f, 0.25f, 3.f}, {2, 2});
  EXPECT_EQ(relu(x).to_vector<float>(), (std::vector<float>{0.f, 0.f, 0.25f, 3.f}));
}

TEST(Relu, Gradcheck) {
  const Tensor x = testing::random_tensor({3, 5}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return relu(in[0]); }, {x}));
}

TEST(Relu, RejectsIntegerInput) {
  EXPECT_THROW(relu(Tensor::zeros({2}, DType::i64)), DTypeError);
}

}  // namespace
}  // namespace liftoff
