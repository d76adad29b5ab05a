#include "ops/flip/flip.h"

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

TEST(Flip, Values) {
  const Tensor x = arange({2, 3});
  EXPECT_EQ(values(flip(x, {1})), (V{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(values(flip(x, {0, -1})), (V{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values(flip(x, {})), values(x));
  EXPECT_EQ(values(flip(transpose(x, 0, 1), {0})), (V{2, 5, 1, 4, 0, 3}));
  EXPECT_EQ(flip(arange({3}, DType::i64), {0}).to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { flip(x, {1, -1}); }, {"flip", "[2, 3]"}));
  EXPECT_TRUE(throws_naming<ShapeError>([&] { flip(x, {2}); }, {"flip", "[2, 3]"}));
}

TEST(Flip, Gradcheck) {
  const Tensor x = testing::random_tensor({2, 3, 4}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return flip(transpose(in[0], 0, 2), {0, 1});
      },
      {x}));
}

TEST(Roll, Values) {
  const Tensor x = arange({2, 3});
  EXPECT_EQ(values(roll(x, {1}, {1})), (V{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(values(roll(x, {-1}, {1})), (V{1, 2, 0, 4, 5, 3}));
  EXPECT_EQ(values(roll(x, {7}, {-1})), (V{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(values(roll(x, {1, 1}, {0, 1})), (V{5, 3, 4, 2, 0, 1}));
  EXPECT_EQ(values(roll(x, {2})), (V{4, 5, 0, 1, 2, 3}));  // flattened
  EXPECT_TRUE(throws_naming<ShapeError>([&] { roll(x, {1, 2}, {0}); }, {"roll", "[2, 3]"}));
  const Tensor w = testing::random_tensor({3, 4}, 2).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return roll(in[0], {-5, 2}, {1, 0});
      },
      {w}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return roll(in[0], {5}); }, {w}));
}

}  // namespace
}  // namespace liftoff
