#include "ops/pad/pad.h"

#include <gtest/gtest.h>

#include "ops/views/views.h"
#include "tests/common/gradcheck.h"
#include "tests/ops/shape_testing.h"

namespace liftoff {
namespace {

using testing::arange;
using testing::throws_naming;
using testing::values;
using V = std::vector<double>;

TEST(Pad, OneDimModes) {
  const Tensor x = arange({4});
  EXPECT_EQ(values(pad(x, {1, 2}, "constant", 9)), (V{9, 0, 1, 2, 3, 9, 9}));
  EXPECT_EQ(values(pad(x, {-1, 1})), (V{1, 2, 3, 0}));
  EXPECT_EQ(values(pad(x, {2, 1}, "reflect")), (V{2, 1, 0, 1, 2, 3, 2}));
  EXPECT_EQ(values(pad(x, {3, 3}, "reflect")), (V{3, 2, 1, 0, 1, 2, 3, 2, 1, 0}));
  EXPECT_EQ(values(pad(x, {2, 1}, "replicate")), (V{0, 0, 0, 1, 2, 3, 3}));
  EXPECT_EQ(values(pad(x, {6, 0}, "replicate")), (V{0, 0, 0, 0, 0, 0, 0, 1, 2, 3}));
}

TEST(Pad, TwoDimsMatchPyTorch) {
  const Tensor x = arange({1, 3, 3});
  // F.pad(torch.arange(9.).view(1, 3, 3), (1, 1, 1, 1), mode="reflect")
  EXPECT_EQ(values(pad(x, {1, 1, 1, 1}, "reflect")),
            (V{4, 3, 4, 5, 4, 1, 0, 1, 2, 1, 4, 3, 4, 5, 4, 7, 6, 7, 8, 7, 4, 3, 4, 5, 4}));
  EXPECT_EQ(values(pad(x, {0, 1, 1, 0}, "replicate")), (V{0, 1, 2, 2, 0, 1, 2, 2, 3, 4, 5, 5, 6, 7, 8, 8}));
  const Tensor c = pad(x, {0, 0, 0, 0, 1, 0}, "constant", -1);  // pads the leading dim too
  EXPECT_EQ(c.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(values(select(c, 0, 0)), V(9, -1));
  EXPECT_EQ(pad(arange({2, 2}, DType::i64), {1, 1}, "constant", 7).to_vector<int64_t>(),
            (std::vector<int64_t>{7, 0, 1, 7, 7, 2, 3, 7}));
  // A strided input reads in logical order.
  EXPECT_EQ(values(pad(transpose(arange({2, 2}), 0, 1), {1, 0}, "replicate")), (V{0, 0, 2, 1, 1, 3}));
}

TEST(Pad, Errors) {
  const Tensor x = arange({2, 3});
  EXPECT_TRUE(throws_naming<ShapeError>([&] { pad(x, {1}); }, {"pad", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { pad(x, {1, 1, 1, 1, 1, 1}); }, {"pad", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { pad(x, {3, 0}, "reflect"); }, {"pad", "reflect", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { pad(x, {-1, 0}, "replicate"); }, {"pad", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { pad(x, {-2, -2}); }, {"pad", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ValueError>([&] { pad(x, {1, 1}, "circular"); }, {"pad", "circular"}));
}

TEST(Pad, BackwardReplicateSumsEdges) {
  const Tensor x = Tensor::zeros({2}, DType::f64).set_requires_grad(true);
  pad(x, {2, 3}, "replicate").backward(arange({7}));
  EXPECT_EQ(values(x.grad()), (V{0 + 1 + 2, 3 + 4 + 5 + 6}));
  const Tensor y = Tensor::zeros({3}, DType::f64).set_requires_grad(true);
  pad(y, {2, 2}, "reflect").backward(arange({7}));  // output reads y[2 1 0 1 2 1 0]
  EXPECT_EQ(values(y.grad()), (V{2 + 6, 1 + 3 + 5, 0 + 4}));
}

TEST(Pad, Gradcheck) {
  const Tensor x = testing::random_tensor({2, 3, 4}, 1).set_requires_grad(true);
  for (const char* mode : {"constant", "reflect", "replicate"}) {
    SCOPED_TRACE(mode);
    EXPECT_TRUE(testing::gradcheck(
        [mode](const std::vector<Tensor>& in) {
          return pad(transpose(in[0], 1, 2), {2, 1, 3, 2}, mode, 0.5);
        },
        {x}));
    EXPECT_TRUE(testing::gradcheck(
        [mode](const std::vector<Tensor>& in) {
          return pad(in[0], {1, 2, 0, 2, 1, 1}, mode);
        },
        {x}));
  }
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return pad(in[0], {-1, 2, 1, -2});
      },
      {x}));
  const Tensor one = testing::random_tensor({2, 1}, 2).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return pad(in[0], {3, 2}, "replicate");
      },
      {one}));
}

}  // namespace
}  // namespace liftoff
