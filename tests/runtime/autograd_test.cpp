#include "runtime/autograd.h"

#include <gtest/gtest.h>

#include "ops/relu/relu.h"

namespace liftoff {
namespace {

// y = x * c via a recorded node, so the engine can be tested with runtime pieces alone.
Tensor times(const Tensor& x, double c) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const double* in = x.data<double>();
  double* out = y.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] * c;
  if (should_record({x})) {
    record(y, "times", {x},
           [c](const Tensor& gy, const NeedsGrad&) { return std::vector<Tensor>{times(gy, c)}; });
  }
  return y;
}

Tensor sum_of(const Tensor& a, const Tensor& b) {
  Tensor y = a.clone().detach();
  accumulate_into(y, b);
  if (should_record({a, b})) {
    record(y, "sum_of", {a, b}, [](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{gy, gy};
    });
  }
  return y;
}

// y = x * c whose backward adds its gradient into the one already waiting for x when the engine offers it
// (waiting_gradient; a convolution's data gradient does so with cuDNN's beta = 1); *taken counts offers used.
Tensor times_adding(const Tensor& x, double c, int* taken) {
  Tensor y = times(x.detach(), c);
  if (should_record({x})) {
    record(y, "times_adding", {x}, [c, taken](const Tensor& gy, const NeedsGrad&) {
      const Tensor g = times(gy, c);
      const Tensor waiting = waiting_gradient(0);
      if (!waiting.defined()) return std::vector<Tensor>{g};
      ++*taken;
      accumulate_into(waiting, g);
      return std::vector<Tensor>{waiting};
    });
  }
  return y;
}

// A node handing its f32 input a bf16 gradient as it is, as autocast's weight copies do for a parameter.
Tensor half_copy(const Tensor& x) {
  Tensor y = x.detach().to(DType::bf16);
  if (should_record({x})) {
    record(y, "half_copy", {x}, [](const Tensor& gy, const NeedsGrad&) { return std::vector<Tensor>{gy}; });
  }
  return y;
}

// A root whose backward gives fixed gradients: bf16 (0.1 rounds to 0.10009765625) to `half`, f32 to `full`.
Tensor fixed_gradient_root(const Tensor& half, const Tensor& full) {
  Tensor y = Tensor::zeros({2}, DType::f32);
  record(y, "fixed_gradient_root", {half, full}, [](const Tensor&, const NeedsGrad&) {
    return std::vector<Tensor>{Tensor::from_vector<float>({0.1f, 3.0f}, {2}).to(DType::bf16),
                               Tensor::from_vector<float>({1.0f, -1.0f}, {2})};
  });
  return y;
}

TEST(Autograd, AHalfAndAnF32GradientOfOneLeafSumInF32) {
  const Tensor x = Tensor::from_vector<float>({1.0f, 2.0f}, {2}).set_requires_grad(true);
  fixed_gradient_root(half_copy(x), x).backward(Tensor::ones({2}));
  ASSERT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1.10009765625f, 2.0f}));
}

// A root giving two bf16 gradients, 1 and 2^-9: their bf16 sum rounds to 1, their f32 sum does not.
Tensor two_half_gradients_root(const Tensor& a, const Tensor& b) {
  Tensor y = Tensor::zeros({1}, DType::f32);
  record(y, "two_half_gradients_root", {a, b}, [](const Tensor&, const NeedsGrad&) {
    return std::vector<Tensor>{Tensor::from_vector<float>({1.0f}, {1}).to(DType::bf16),
                               Tensor::from_vector<float>({0.001953125f}, {1}).to(DType::bf16)};
  });
  return y;
}

TEST(Autograd, TwoHalfGradientsOfAnF32LeafSumInF32) {
  const Tensor x = Tensor::from_vector<float>({1.0f}, {1}).set_requires_grad(true);
  two_half_gradients_root(half_copy(x), half_copy(x)).backward(Tensor::ones({1}));
  ASSERT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1.001953125f}));
}

TEST(Autograd, AHalfGradientOfAnF32LeafArrivesInF32AndAccumulates) {
  const Tensor x = Tensor::from_vector<float>({1.0f, 2.0f}, {2}).set_requires_grad(true);
  const Tensor other = Tensor::from_vector<float>({0.0f, 0.0f}, {2}).set_requires_grad(true);
  for (int pass = 0; pass < 2; ++pass) fixed_gradient_root(half_copy(x), other).backward(Tensor::ones({2}));
  ASSERT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0.2001953125f, 6.0f}));
}

TEST(Autograd, SharedSubgraphAccumulates) {
  const Tensor x = Tensor::from_vector<double>({1.0, -2.0}, {2}).set_requires_grad(true);
  const Tensor h = times(x, 3.0);
  const Tensor y = sum_of(times(h, 2.0), times(h, 5.0));  // dy/dx = 3 * (2 + 5)
  y.backward(Tensor::ones({2}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{21.0, 21.0}));
}

// h feeds two branches; the one run second finds the other's gradient waiting for h and adds into it: the
// sum counts each branch once.
TEST(Autograd, AWaitingGradientIsAddedIntoOnce) {
  const Tensor x = Tensor::from_vector<double>({1.0, -2.0}, {2}).set_requires_grad(true);
  const Tensor h = times(x, 3.0);
  int taken = 0;
  // sum_of's backward pushes its inputs' nodes in order, and the engine runs the last pushed first: times(h,
  // 5) leaves its own gradient for h, then times_adding is offered it.
  sum_of(times_adding(h, 2.0, &taken), times(h, 5.0)).backward(Tensor::ones({2}, DType::f64));
  EXPECT_EQ(taken, 1);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{21.0, 21.0}));
}

// A waiting gradient someone else holds too (add's backward hands one tensor to both inputs) is not offered:
// writing it would change the other holder's value.
TEST(Autograd, ASharedWaitingGradientIsNotOffered) {
  const Tensor x = Tensor::from_vector<double>({1.0, -2.0}, {2}).set_requires_grad(true);
  const Tensor h = times(x, 3.0);
  int taken = 0;
  sum_of(times_adding(h, 2.0, &taken), h).backward(Tensor::ones({2}, DType::f64));
  EXPECT_EQ(taken, 0);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{9.0, 9.0}));
}

// A leaf's gradients are summed by its accumulator (in the leaf's dtype): never offered.
TEST(Autograd, ALeafsWaitingGradientIsNotOffered) {
  const Tensor x = Tensor::from_vector<double>({1.0, -2.0}, {2}).set_requires_grad(true);
  int taken = 0;
  sum_of(times_adding(x, 2.0, &taken), times(x, 5.0)).backward(Tensor::ones({2}, DType::f64));
  EXPECT_EQ(taken, 0);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{7.0, 7.0}));
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  const Tensor x = Tensor::from_vector<double>({1.0}, {1}).set_requires_grad(true);
  times(x, 2.0).backward();
  times(x, 3.0).backward();
  EXPECT_EQ(x.grad().item(), 5.0);
}

TEST(Autograd, SameTensorTwiceIntoOneOp) {
  const Tensor x = Tensor::from_vector<double>({4.0}, {1}).set_requires_grad(true);
  sum_of(x, x).backward();
  EXPECT_EQ(x.grad().item(), 2.0);
}

TEST(Autograd, NoGradGuardStopsRecording) {
  const Tensor x = Tensor::from_vector<double>({1.0}, {1}).set_requires_grad(true);
  {
    NoGradGuard guard;
    EXPECT_FALSE(times(x, 2.0).requires_grad());
  }
  EXPECT_TRUE(times(x, 2.0).requires_grad());
  EXPECT_THROW(Tensor::ones({1}, DType::f64).backward(), ValueError);
}

TEST(Autograd, GradReadyHookFiresOncePerBackward) {
  const Tensor x = Tensor::from_vector<double>({1.0, 2.0}, {2}).set_requires_grad(true);
  int calls = 0;
  double seen = 0;
  x.add_grad_ready_hook([&](const Tensor& leaf) {
    ++calls;
    seen = leaf.grad().to_vector<double>()[0];
  });
  const Tensor h = times(x, 1.0);
  sum_of(times(h, 2.0), times(h, 3.0)).backward(Tensor::ones({2}, DType::f64));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, 5.0);
}

TEST(Autograd, SecondBackwardThroughFreedGraphIsAnError) {
  const Tensor x = Tensor::from_vector<double>({1.0}, {1}).set_requires_grad(true);
  const Tensor y = relu(times(x, 2.0));
  y.backward();
  EXPECT_THROW(y.backward(), ValueError);
}

TEST(Autograd, IntegerTensorsCannotRequireGrad) {
  EXPECT_THROW(Tensor::zeros({1}, DType::i64).set_requires_grad(true), DTypeError);
}

}  // namespace
}  // namespace liftoff

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Autograd, ViewsAndContiguousAreDifferentiable) {
  const Tensor x = testing::random_tensor({3, 4, 5}, 9).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return relu(in[0].permute({2, 0, 1}).slice(2, 1, 4).contiguous());
      },
      {x}));
  EXPECT_TRUE(
      testing::gradcheck([](const std::vector<Tensor>& in) { return relu(in[0].select(1, 2)); }, {x}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return relu(in[0].view({12, 5}));
      },
      {x}));
}

TEST(Autograd, OpOnStridedInputKeepsGradient) {
  const Tensor x = testing::random_tensor({4, 6}, 10).set_requires_grad(true);
  relu(x.permute({1, 0})).backward(Tensor::ones({6, 4}, DType::f64));
  ASSERT_TRUE(x.grad().defined());
}

}  // namespace
}  // namespace liftoff
