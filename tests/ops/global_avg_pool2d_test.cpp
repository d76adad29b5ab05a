#include "ops/global_avg_pool2d/global_avg_pool2d.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

template <class E, class Fn>
void expect_error(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << fragment << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(GlobalAvgPool2d, HandComputed) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -7}, {1, 2, 2, 3});
  const std::vector<float> y = global_avg_pool2d(x).to_vector<float>();
  ASSERT_EQ(y.size(), 2u);
  EXPECT_FLOAT_EQ(y[0], 3.5f);
  EXPECT_FLOAT_EQ(y[1], -11.0f / 3.0f);
}

TEST(GlobalAvgPool2d, MatchesPlaneMeans) {
  const Tensor x = testing::random_tensor({3, 5, 7, 6}, 9);
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> expected;
  for (int p = 0; p < 15; ++p) {
    double sum = 0;
    for (int j = 0; j < 42; ++j) sum += xv[static_cast<size_t>(p * 42 + j)];
    expected.push_back(sum / 42.0);
  }
  EXPECT_TRUE(
      testing::all_close(global_avg_pool2d(x), Tensor::from_vector<double>(expected, {3, 5}), 1e-15, 1e-14));
}

TEST(GlobalAvgPool2d, Gradcheck) {
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{1, 2, 1, 1}, Shape{3, 1, 7, 7}}) {
    const Tensor x = testing::random_tensor(shape, 10).set_requires_grad(true);
    EXPECT_TRUE(
        testing::gradcheck([](const std::vector<Tensor>& in) { return global_avg_pool2d(in[0]); }, {x}))
        << shape_str(shape);
  }
}

TEST(GlobalAvgPool2d, RejectsBadArguments) {
  expect_error<ShapeError>([] { global_avg_pool2d(Tensor::zeros({2, 3, 8})); }, "4-D input");
  expect_error<ShapeError>([] { global_avg_pool2d(Tensor::zeros({2, 3, 0, 4})); }, "[2, 3, 0, 4]");
  expect_error<DTypeError>([] { global_avg_pool2d(Tensor::zeros({2, 3, 4, 4}, DType::i64)); }, "floating");
}

}  // namespace
}  // namespace liftoff
