#include "ops/repeat/repeat.h"

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

TEST(Repeat, Values) {
  const Tensor x = arange({2});
  EXPECT_EQ(values(repeat(x, {3})), (V{0, 1, 0, 1, 0, 1}));
  const Tensor r = repeat(x, {2, 2});
  EXPECT_EQ(r.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(r), (V{0, 1, 0, 1, 0, 1, 0, 1}));
  const Tensor m = arange({2, 2});
  EXPECT_EQ(values(repeat(transpose(m, 0, 1), {2, 1})), (V{0, 2, 1, 3, 0, 2, 1, 3}));
  EXPECT_EQ(repeat(m, {0, 3}).shape(), (Shape{0, 6}));
  EXPECT_EQ(repeat(arange({2}, DType::i64), {2}).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { repeat(m, {2}); }, {"repeat", "[2, 2]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { repeat(m, {2, -1}); }, {"repeat", "[2, 2]"}));
}

TEST(Repeat, BackwardSumsTiles) {
  const Tensor x = Tensor::zeros({2}, DType::f64).set_requires_grad(true);
  repeat(x, {2, 3}).backward(arange({2, 6}));
  EXPECT_EQ(values(x.grad()), (V{0 + 2 + 4 + 6 + 8 + 10, 1 + 3 + 5 + 7 + 9 + 11}));
  const Tensor w = testing::random_tensor({2, 3}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return repeat(transpose(in[0], 0, 1), {2, 1, 2});
      },
      {w}));
}

}  // namespace
}  // namespace liftoff
