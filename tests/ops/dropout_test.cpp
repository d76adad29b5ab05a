#include "ops/dropout/dropout.h"

#include <gtest/gtest.h>

#include "runtime/philox.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Dropout, EvalAndZeroProbabilityReturnInput) {
  Generator gen(1);
  const Tensor x = testing::random_tensor({10}, 1);
  EXPECT_TRUE(dropout(x, 0.5, false, gen).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true, gen).same(x));
  EXPECT_EQ(gen.offset(), 0u);
}

TEST(Dropout, MaskFollowsPhilox) {
  const uint64_t seed = 1234;
  Generator gen(seed);
  gen.next_offset();  // this draw uses offset 1
  const Tensor x = testing::random_tensor({1001}, 2, 0.5, 1.5);
  const double p = 0.3;
  const std::vector<double> y = dropout(x, p, true, gen).to_vector<double>();
  const std::vector<double> xv = x.to_vector<double>();
  int64_t dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const uint32_t bits = philox_at(seed, 1, i / 4).v[i % 4];
    const bool keep = philox_uniform(bits) >= static_cast<float>(p);
    EXPECT_DOUBLE_EQ(y[i], keep ? xv[i] / (1.0 - p) : 0.0) << "element " << i;
    dropped += keep ? 0 : 1;
  }
  EXPECT_GT(dropped, 240);  // about 300 of 1001
  EXPECT_LT(dropped, 360);
  EXPECT_EQ(gen.offset(), 2u);
}

TEST(Dropout, SuccessiveCallsDrawNewMasks) {
  Generator gen(7);
  const Tensor x = Tensor::ones({256}, DType::f64);
  EXPECT_NE(dropout(x, 0.5, true, gen).to_vector<double>(), dropout(x, 0.5, true, gen).to_vector<double>());
}

TEST(Dropout, ProbabilityOneZeroesEverything) {
  Generator gen(3);
  const Tensor x = Tensor::ones({17});
  EXPECT_EQ(dropout(x, 1.0, true, gen).to_vector<float>(), std::vector<float>(17, 0.f));
}

TEST(Dropout, BackwardUsesTheSameMask) {
  Generator gen(11);
  const Tensor x = testing::random_tensor({64}, 4, 0.5, 1.5).set_requires_grad(true);
  const Tensor y = dropout(x, 0.4, true, gen);
  y.backward(Tensor::ones({64}, DType::f64));
  const std::vector<double> yv = y.to_vector<double>();
  const std::vector<double> g = x.grad().to_vector<double>();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_DOUBLE_EQ(g[i], yv[i] == 0.0 ? 0.0 : 1.0 / 0.6);
}

TEST(Dropout, Gradcheck) {
  const Tensor x = testing::random_tensor({4, 5}, 5).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        Generator gen(99);  // same mask on every call
        return dropout(in[0], 0.25, true, gen);
      },
      {x}));
}

TEST(Dropout, RejectsBadArguments) {
  Generator gen(0);
  EXPECT_THROW(dropout(Tensor::zeros({2}), 1.5, true, gen), ValueError);
  EXPECT_THROW(dropout(Tensor::zeros({2}), -0.1, true, gen), ValueError);
  EXPECT_THROW(dropout(Tensor::zeros({2}, DType::i32), 0.5, true, gen), DTypeError);
}

}  // namespace
}  // namespace liftoff
