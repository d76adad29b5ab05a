// Channels-last (NHWC) layout helpers of Tensor, copies between layouts, and gradient accumulation of
// gradients that arrive in either layout (CPU).
#include <gtest/gtest.h>

#include "runtime/autograd.h"
#include "runtime/tensor.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

constexpr MemoryFormat kCl = MemoryFormat::channels_last;

Tensor channels_last_copy(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device(), kCl);
  out.copy_(t);
  return out;
}

TEST(ChannelsLast, Strides) {
  EXPECT_EQ(channels_last_strides({2, 3, 4, 5}), Shape({60, 1, 15, 3}));
  EXPECT_EQ(channels_last_strides({0, 3, 4, 5}), Shape({60, 1, 15, 3}));
  EXPECT_THROW(channels_last_strides({2, 3, 4}), ShapeError);
  EXPECT_STREQ(memory_format_name(kCl), "channels_last");
  EXPECT_STREQ(memory_format_name(MemoryFormat::contiguous), "contiguous");
}

TEST(ChannelsLast, EmptyAndPredicates) {
  const Tensor t = Tensor::empty({2, 3, 4, 5}, DType::f32, Device::cpu(), kCl);
  EXPECT_EQ(t.strides(), Shape({60, 1, 15, 3}));
  EXPECT_TRUE(t.is_channels_last());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(t.is_contiguous(kCl));
  EXPECT_FALSE(t.is_contiguous(MemoryFormat::contiguous));
  EXPECT_EQ(t.memory_format(), kCl);
  EXPECT_EQ(t.storage().nbytes(), 120u * sizeof(float));

  const Tensor n = Tensor::empty({2, 3, 4, 5});
  EXPECT_FALSE(n.is_channels_last());
  EXPECT_EQ(n.memory_format(), MemoryFormat::contiguous);
  // A permuted NHWC buffer viewed as NCHW is channels-last.
  const Tensor nhwc = Tensor::empty({2, 4, 5, 3});
  EXPECT_TRUE(nhwc.permute({0, 3, 1, 2}).is_channels_last());
  // Not 4-D: never channels-last.
  EXPECT_FALSE(Tensor::empty({2, 3}).is_channels_last());
  EXPECT_THROW(Tensor::empty({2, 3}, DType::f32, Device::cpu(), kCl), ShapeError);
}

TEST(ChannelsLast, OneChannelIsBothLayouts) {
  // C == 1: both layouts address the same bytes.
  const Tensor t = Tensor::empty({2, 1, 4, 5}, DType::f32, Device::cpu(), kCl);
  EXPECT_TRUE(t.is_channels_last());
  EXPECT_TRUE(t.is_contiguous());
  const Tensor src = testing::random_tensor({2, 1, 4, 5}, 3, -1, 1, DType::f32);
  t.copy_(src);
  EXPECT_EQ(t.to_vector<float>(), src.to_vector<float>());
}

TEST(ChannelsLast, ContiguousRoundTripKeepsValues) {
  const Tensor x = testing::random_tensor({2, 3, 4, 5}, 11, -1, 1, DType::f32);
  const Tensor cl = x.contiguous(kCl);
  EXPECT_TRUE(cl.is_channels_last());
  EXPECT_EQ(cl.to_vector<float>(), x.to_vector<float>());  // logical order
  // Memory order is NHWC: element (n, c, h, w) sits at ((n * H + h) * W + w) * C + c.
  const float* raw = cl.data<float>();
  const std::vector<float> v = x.to_vector<float>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t w = 0; w < 5; ++w)
          ASSERT_EQ(raw[((n * 4 + h) * 5 + w) * 3 + c],
                    v[static_cast<size_t>(((n * 3 + c) * 4 + h) * 5 + w)]);
  EXPECT_TRUE(cl.contiguous(kCl).same(cl));
  EXPECT_TRUE(x.contiguous(MemoryFormat::contiguous).same(x));
  const Tensor back = cl.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(back.to_vector<float>(), v);
  // Copies between tensors of one layout are linear; with a dtype change too.
  const Tensor cl64 = Tensor::empty(x.shape(), DType::f64, Device::cpu(), kCl);
  cl64.copy_(cl);
  EXPECT_EQ(cl64.to_vector<float>(), v);
  // clone() stays contiguous.
  EXPECT_TRUE(cl.clone().is_contiguous());
}

TEST(ChannelsLast, ContiguousIsDifferentiable) {
  const Tensor x = testing::random_tensor({2, 3, 2, 2}, 5).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& t) { return t[0].contiguous(kCl); }, {x}));
}

TEST(ChannelsLast, AccumulateIntoEitherLayout) {
  const Tensor a = testing::random_tensor({2, 3, 4, 5}, 1, -1, 1, DType::f32);
  const Tensor b = testing::random_tensor({2, 3, 4, 5}, 2, -1, 1, DType::f32);
  std::vector<float> expected = a.to_vector<float>();
  const std::vector<float> bv = b.to_vector<float>();
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += bv[i];
  for (bool dst_cl : {false, true}) {
    for (bool src_cl : {false, true}) {
      const Tensor dst = dst_cl ? channels_last_copy(a) : a.clone();
      const Tensor src = src_cl ? channels_last_copy(b) : b.clone();
      accumulate_into(dst, src);
      EXPECT_EQ(dst.is_channels_last(), dst_cl);
      const std::vector<float> got = dst.to_vector<float>();
      for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], expected[i]) << dst_cl << src_cl << i;
    }
  }
  // A strided (neither layout) destination is refused.
  const Tensor strided = Tensor::empty({2, 5, 4, 3}).permute({0, 3, 2, 1});
  EXPECT_THROW(accumulate_into(strided, b), ValueError);
}

// An op whose backward hands its one input two gradients, one channels-last and one contiguous: the engine
// sums them (in the first one's layout) before the input's node runs.
Tensor fork_two_layouts(const Tensor& x, bool first_channels_last) {
  Tensor y = x.detach().clone();
  record(y, "fork_two_layouts", {x, x}, [first_channels_last](const Tensor& gy, const NeedsGrad&) {
    const Tensor cl = channels_last_copy(gy);
    const Tensor plain = gy.contiguous().clone();
    return first_channels_last ? std::vector<Tensor>{cl, plain} : std::vector<Tensor>{plain, cl};
  });
  return y;
}

TEST(ChannelsLast, AutogradSumsGradientsOfMixedLayouts) {
  for (bool first_cl : {false, true}) {
    const Tensor x = testing::random_tensor({2, 3, 2, 4}, 9, -1, 1, DType::f32).set_requires_grad(true);
    // Through a non-leaf (the view's node gets both gradients), and straight into the leaf.
    const Tensor mid = x.view(x.shape());
    const Tensor g = testing::random_tensor(x.shape(), 10, -1, 1, DType::f32);
    fork_two_layouts(mid, first_cl).backward(g);
    const std::vector<float> gv = g.to_vector<float>();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_TRUE(x.grad().is_contiguous());  // the leaf's own layout
    std::vector<float> got = x.grad().to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], 2 * gv[i]) << first_cl << " " << i;

    x.set_grad(Tensor());
    fork_two_layouts(x, first_cl).backward(g);
    EXPECT_TRUE(x.grad().is_contiguous());
    got = x.grad().to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], 2 * gv[i]) << first_cl << " " << i;
  }
}

TEST(ChannelsLast, LeafGradientKeepsTheLeafsLayout) {
  const Tensor g = testing::random_tensor({2, 3, 2, 4}, 12, -1, 1, DType::f32);
  const std::vector<float> gv = g.to_vector<float>();
  // A channels-last leaf gets a channels-last .grad from a contiguous gradient, and accumulates a second
  // (channels-last) one into it.
  const Tensor x = channels_last_copy(testing::random_tensor({2, 3, 2, 4}, 13, -1, 1, DType::f32));
  x.set_requires_grad(true);
  x.contiguous().backward(g);
  ASSERT_TRUE(x.grad().is_channels_last());
  x.contiguous(kCl).contiguous().backward(g);  // x itself (already channels-last), then a copy
  ASSERT_TRUE(x.grad().is_channels_last());
  const std::vector<float> got = x.grad().to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], 2 * gv[i]) << i;

  // A contiguous leaf whose gradient arrives channels-last gets a contiguous .grad (optimizers read it flat).
  const Tensor p = testing::random_tensor({2, 3, 2, 4}, 14, -1, 1, DType::f32).set_requires_grad(true);
  p.contiguous(kCl).backward(channels_last_copy(g));
  ASSERT_TRUE(p.grad().is_contiguous());
  EXPECT_EQ(p.grad().to_vector<float>(), gv);
  // And an f64 gradient for an f32 leaf is converted in the same step.
  const Tensor q = testing::random_tensor({2, 3, 2, 4}, 15, -1, 1, DType::f32).set_requires_grad(true);
  q.contiguous(kCl).backward(channels_last_copy(g.to(DType::f64)));
  ASSERT_TRUE(q.grad().is_contiguous());
  EXPECT_EQ(q.grad().dtype(), DType::f32);
  EXPECT_EQ(q.grad().to_vector<float>(), gv);
}

}  // namespace
}  // namespace liftoff
