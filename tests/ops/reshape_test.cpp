#include "ops/reshape/reshape.h"

#include <gtest/gtest.h>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Reshape, ViewSharesStorageWhenContiguous) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor y = reshape(x, {3, -1});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.raw_data(), x.raw_data());
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
}

TEST(Reshape, CopiesStridedInputInLogicalOrder) {
  const Tensor x =
      Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).permute({1, 0});  // [[1,4],[2,5],[3,6]]
  const Tensor y = reshape(x, {6});
  EXPECT_NE(y.raw_data(), x.raw_data());
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Reshape, Gradcheck) {
  const Tensor x = testing::random_tensor({2, 3, 4}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return reshape(in[0], {4, -1}); }, {x}));
}

TEST(Reshape, BackwardThroughStridedLeaf) {
  // A non-contiguous leaf takes the copy path; its gradient comes back in its own logical layout.
  const Tensor x =
      Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).permute({1, 0}).set_requires_grad(true);
  reshape(x, {6}).backward(Tensor::from_vector<double>({10, 20, 30, 40, 50, 60}, {6}));
  EXPECT_EQ(x.grad().shape(), (Shape{3, 2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{10, 20, 30, 40, 50, 60}));
}

TEST(Reshape, BackwardRestoresShape) {
  const Tensor x = testing::random_tensor({2, 3}, 2).set_requires_grad(true);
  reshape(x, {6}).backward(Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {6}));
  EXPECT_EQ(x.grad().shape(), (Shape{2, 3}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Reshape, RejectsBadShapes) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_THROW(reshape(x, {4, 2}), ShapeError);
  EXPECT_THROW(reshape(x, {-1, -1}), ShapeError);
  EXPECT_THROW(reshape(x, {4, -1}), ShapeError);
  EXPECT_THROW(reshape(x, {-2, 3}), ShapeError);
  EXPECT_THROW(reshape(Tensor(), {1}), ValueError);
}

TEST(Flatten, Shapes) {
  const Tensor x = Tensor::zeros({2, 3, 4, 5});
  EXPECT_EQ(flatten(x).shape(), (Shape{2, 60}));
  EXPECT_EQ(flatten(x, 0).shape(), (Shape{120}));
  EXPECT_EQ(flatten(x, 2).shape(), (Shape{2, 3, 20}));
  EXPECT_EQ(flatten(x, -1).shape(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(flatten(Tensor::zeros({}), 0).shape(), (Shape{1}));
  EXPECT_THROW(flatten(x, 4), ShapeError);
  EXPECT_THROW(flatten(x, -5), ShapeError);
}

TEST(Flatten, Gradcheck) {
  const Tensor x = testing::random_tensor({2, 2, 3}, 3).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return flatten(in[0]); }, {x}));
}

}  // namespace
}  // namespace liftoff
