#include "ops/common/broadcast.h"

#include <gtest/gtest.h>

#include "ops/binary/binary.h"
#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Broadcast, Shapes) {
  EXPECT_EQ(broadcast_shapes({2, 3}, {3}, "op"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}, "op"), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}, "op"), (Shape{5}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 3}, "op"), (Shape{0, 3}));
  try {
    broadcast_shapes({2, 3}, {4, 3}, "myop");
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("myop: shapes [2, 3] and [4, 3] do not broadcast"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(broadcasts_to({3, 1}, {2, 3, 4}));
  EXPECT_FALSE(broadcasts_to({2, 3, 4}, {3, 4}));
  EXPECT_FALSE(broadcasts_to({2}, {3}));
}

TEST(Broadcast, SumToShape) {
  const Tensor g = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(sum_to_shape(g, {2, 3}).same(g));
  EXPECT_EQ(sum_to_shape(g, {3}).to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(sum_to_shape(g, {2, 1}).to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_EQ(sum_to_shape(g, {}).item(), 21);
  EXPECT_EQ(sum_to_shape(g, {1, 1}).shape(), (Shape{1, 1}));
  EXPECT_THROW(sum_to_shape(g, {4}), ShapeError);
}

TEST(Broadcast, BroadcastToIsAViewWithAGradient) {
  const Tensor x = Tensor::from_vector<double>({1, 2}, {2, 1}).set_requires_grad(true);
  const Tensor v = broadcast_to(x, {3, 2, 4});
  EXPECT_EQ(v.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(v.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(v.contiguous().to_vector<double>()[5], 2);
  EXPECT_EQ(add(v, 1.0).to_vector<double>()[0], 2);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return broadcast_to(in[0], {3, 2, 4});
      },
      {testing::random_tensor({2, 1}, 1).set_requires_grad(true)}));
  EXPECT_THROW(broadcast_to(x, {3, 3}), ShapeError);
}

TEST(Broadcast, PromoteFloating) {
  EXPECT_EQ(promote_floating(DType::bf16, DType::f32, "op"), DType::f32);
  EXPECT_EQ(promote_floating(DType::f16, DType::bf16, "op"), DType::f32);
  EXPECT_EQ(promote_floating(DType::f32, DType::f64, "op"), DType::f64);
  EXPECT_EQ(promote_floating(DType::bf16, DType::bf16, "op"), DType::bf16);
  EXPECT_THROW(promote_floating(DType::i64, DType::f32, "op"), DTypeError);
}

}  // namespace
}  // namespace liftoff
