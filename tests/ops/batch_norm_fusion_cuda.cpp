// A user's relu / residual add folded into batch norm's normalize pass on CUDA (ops/batch_norm2d/fusion.h),
// checked against the unfused CPU reference: values and every gradient, and that the fusion happened.
#include <gtest/gtest.h>

#include "ops/batch_norm2d/batch_norm2d.h"
#include "ops/binary/binary.h"
#include "ops/cast/cast.h"
#include "ops/reduce/reduce.h"
#include "ops/relu/relu.h"
#include "ops/unary/unary.h"
#include "runtime/autograd.h"
#include "runtime/config.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

Tensor rnd(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  return testing::random_tensor(shape, seed, lo, hi, DType::f32);
}

Tensor bn(const Tensor& x, const Tensor& w, const Tensor& b) {
  return batch_norm2d(x, w, b, Tensor(), Tensor(), true);
}

const testing::ParityOptions kTol{/*atol=*/2e-3, /*rtol=*/1e-3};

TEST(BatchNormFusionCuda, ReluFoldsIntoTheNormalizePass) {
  LIFTOFF_REQUIRE_CUDA();
  auto fn = [](const std::vector<Tensor>& t) { return relu(bn(t[0], t[1], t[2])); };
  const std::vector<Tensor> in{rnd({8, 16, 5, 5}, 1).set_requires_grad(true),
                               rnd({16}, 2, 0.5, 1.5).set_requires_grad(true),
                               rnd({16}, 3).set_requires_grad(true)};
  EXPECT_TRUE(testing::cuda_parity(fn, in, kTol));
  std::vector<Tensor> dev;
  for (const Tensor& t : in) dev.push_back(t.detach().to(Device::cuda()).set_requires_grad(true));
  const Tensor y = fn(dev);
  ASSERT_TRUE(y.grad_fn() != nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "batch_norm2d_relu");
}

// relu6 (MobileNetV2's activation) folds too; weights of 3-5 push a good share of the outputs past the cap,
// so both kinks of the gradient mask are exercised.
TEST(BatchNormFusionCuda, Relu6FoldsWithAndWithoutAResidual) {
  LIFTOFF_REQUIRE_CUDA();
  auto plain = [](const std::vector<Tensor>& t) { return relu6(bn(t[0], t[1], t[2])); };
  auto residual = [](const std::vector<Tensor>& t) { return relu6(bn(t[0], t[1], t[2]) + t[3]); };
  const std::vector<Tensor> in{rnd({8, 24, 6, 6}, 11).set_requires_grad(true),
                               rnd({24}, 12, 3.0, 5.0).set_requires_grad(true),
                               rnd({24}, 13, -1.0, 3.0).set_requires_grad(true),
                               rnd({8, 24, 6, 6}, 14, -2.0, 2.0).set_requires_grad(true)};
  EXPECT_TRUE(testing::cuda_parity(plain, {in[0], in[1], in[2]}, kTol));
  EXPECT_TRUE(testing::cuda_parity(residual, in, kTol));
  std::vector<Tensor> dev;
  for (const Tensor& t : in) dev.push_back(t.detach().to(Device::cuda()).set_requires_grad(true));
  const Tensor y = plain(dev);
  ASSERT_TRUE(y.grad_fn() != nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "batch_norm2d_relu6");
  const Tensor host = y.detach().to(Device::cpu());
  int64_t capped = 0, zero = 0;
  for (int64_t i = 0; i < host.numel(); ++i) {
    const float v = host.data<float>()[i];
    capped += v == 6.0f;
    zero += v == 0.0f;
  }
  EXPECT_GT(capped, host.numel() / 20) << "too few outputs at the cap to test its gradient";
  EXPECT_GT(zero, host.numel() / 20);
  EXPECT_EQ(residual(dev).grad_fn()->name(), "batch_norm2d_relu6");
}

TEST(BatchNormFusionCuda, ResidualAddAndReluFoldOnEitherSide) {
  LIFTOFF_REQUIRE_CUDA();
  auto right = [](const std::vector<Tensor>& t) { return relu(bn(t[0], t[1], t[2]) + t[3]); };
  auto left = [](const std::vector<Tensor>& t) { return relu(t[3] + bn(t[0], t[1], t[2])); };
  auto no_relu = [](const std::vector<Tensor>& t) { return bn(t[0], t[1], t[2]) + t[3]; };
  // Two batch norms meeting in the add (a projection shortcut): one folds, the other is issued as input.
  auto both = [](const std::vector<Tensor>& t) { return relu(bn(t[0], t[1], t[2]) + bn(t[3], t[1], t[2])); };
  const std::vector<Tensor> in{
      rnd({4, 8, 6, 6}, 4).set_requires_grad(true), rnd({8}, 5, 0.5, 1.5).set_requires_grad(true),
      rnd({8}, 6).set_requires_grad(true), rnd({4, 8, 6, 6}, 7).set_requires_grad(true)};
  for (const testing::TensorFn& fn : std::vector<testing::TensorFn>{right, left, no_relu, both})
    EXPECT_TRUE(testing::cuda_parity(fn, in, kTol));
  std::vector<Tensor> dev;
  for (const Tensor& t : in) dev.push_back(t.detach().to(Device::cuda()).set_requires_grad(true));
  EXPECT_EQ(right(dev).grad_fn()->name(), "batch_norm2d_relu");
  EXPECT_EQ(left(dev).grad_fn()->name(), "batch_norm2d_relu");
  EXPECT_EQ(no_relu(dev).grad_fn()->name(), "batch_norm2d");
}

// The batch norm's own output, when someone keeps and reads it, holds bn(x): the fused consumer does not
// change it, and it is written before backward (after which the parameters may change).
TEST(BatchNormFusionCuda, AKeptOutputStillReadsAsBatchNorm) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = rnd({4, 8, 3, 3}, 8), w = rnd({8}, 9, 0.5, 1.5), b = rnd({8}, 10);
  const Tensor expected_y = bn(x, w, b);
  const Tensor expected_z = relu(expected_y);
  const Device cuda = Device::cuda();
  const Tensor wd = w.to(cuda).set_requires_grad(true);
  const Tensor y = bn(x.to(cuda), wd, b.to(cuda));
  const Tensor z = relu(y);
  sum(z).backward();
  wd.detach().fill_(100.0);  // what an optimizer step does to the parameters after backward
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu()), expected_y, 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(z.to(Device::cpu()), expected_z, 1e-4, 1e-4));
}

// Views, other dtypes and evaluation take the ordinary path (and stay right).
TEST(BatchNormFusionCuda, ViewsAndEvaluationStayCorrect) {
  LIFTOFF_REQUIRE_CUDA();
  auto view = [](const std::vector<Tensor>& t) { return relu(bn(t[0], t[1], t[2]).slice(1, 0, 4)); };
  const std::vector<Tensor> in{rnd({4, 8, 3, 3}, 11).set_requires_grad(true), rnd({8}, 12, 0.5, 1.5),
                               rnd({8}, 13)};
  EXPECT_TRUE(testing::cuda_parity(view, in, kTol));
  auto eval = [](const std::vector<Tensor>& t) {
    return relu(batch_norm2d(t[0], t[1], t[2], t[3], t[4], false) + t[0]);
  };
  EXPECT_TRUE(testing::cuda_parity(
      eval, {rnd({4, 8, 3, 3}, 14), rnd({8}, 15, 0.5, 1.5), rnd({8}, 16), rnd({8}, 17), rnd({8}, 18, 0.5, 2)},
      {1e-4, 1e-4, DType::f32, /*check_grads=*/false}));
}

// ---- small channels-last inputs: the whole training forward deferred (statistics too) -------------------

// A small channels-last input (at most 2048 rows) whose forward is one launch: its statistics wait for the
// normalize pass (fusion.h). Values bf16 holds, so the CPU reference sees the same input.
struct SmallLayer {
  Tensor x = rnd({32, 16, 4, 4}, 30, -1, 3).to(DType::bf16).to(DType::f32);
  Tensor w = rnd({16}, 31, 0.5, 1.5), b = rnd({16}, 32);
  Tensor rm = rnd({16}, 33, -0.5, 0.5), rv = rnd({16}, 34, 0.5, 2);
  Tensor on_device(const Tensor& t) const {
    return t.dim() == 4 ? t.to(DType::bf16).to(Device::cuda()).contiguous(MemoryFormat::channels_last)
                        : t.to(Device::cuda());
  }
};

// Reading the running statistics before the output takes them (alone); the output still reads as bn(x).
TEST(BatchNormFusionCuda, RunningStatisticsReadFirstAreUpToDate) {
  LIFTOFF_REQUIRE_CUDA();
  SmallLayer l;
  const Tensor rm = l.on_device(l.rm), rv = l.on_device(l.rv);
  const Tensor tracked = Tensor::zeros({}, DType::i64, Device::cuda());
  const Tensor y =
      batch_norm2d(l.on_device(l.x), l.on_device(l.w), l.on_device(l.b), rm, rv, true, 0.1, 1e-5, tracked);
  const Tensor expected_y = batch_norm2d(l.x, l.w, l.b, l.rm, l.rv, true);
  EXPECT_EQ(tracked.to_vector<int64_t>()[0], 1);  // the batch count read first issues them too
  EXPECT_TRUE(testing::all_close(rm.to(Device::cpu()), l.rm, 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(rv.to(Device::cpu()), l.rv, 1e-4, 1e-4));
  EXPECT_EQ(tracked.to_vector<int64_t>()[0], 1);
  EXPECT_TRUE(testing::all_close(y.to(DType::f32).to(Device::cpu()), expected_y, 3e-2, 3e-2));
  EXPECT_EQ(tracked.to_vector<int64_t>()[0], 1);
}

// An output dropped unread still advances the running statistics, once, before they are read; two forwards
// in a row update them in order.
TEST(BatchNormFusionCuda, DroppedOutputsStillAdvanceTheRunningStatistics) {
  LIFTOFF_REQUIRE_CUDA();
  SmallLayer l;
  const Tensor x2 = rnd({32, 16, 4, 4}, 35, -2, 1).to(DType::bf16).to(DType::f32);
  const Tensor rm = l.on_device(l.rm), rv = l.on_device(l.rv);
  const Tensor tracked = Tensor::zeros({}, DType::i64, Device::cuda());
  batch_norm2d(l.on_device(l.x), l.on_device(l.w), l.on_device(l.b), rm, rv, true, 0.1, 1e-5, tracked);
  batch_norm2d(l.on_device(x2), l.on_device(l.w), l.on_device(l.b), rm, rv, true, 0.1, 1e-5, tracked);
  batch_norm2d(l.x, l.w, l.b, l.rm, l.rv, true);
  batch_norm2d(x2, l.w, l.b, l.rm, l.rv, true);
  EXPECT_TRUE(testing::all_close(rm.to(Device::cpu()), l.rm, 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(rv.to(Device::cpu()), l.rv, 1e-4, 1e-4));
  EXPECT_EQ(tracked.to_vector<int64_t>()[0], 2);
}

// bn(x) + r then relu6 folds into one launch with the statistics; the kept bn(x) reads right afterwards, the
// running statistics advance once, and the gradients match the CPU's.
TEST(BatchNormFusionCuda, AFoldedChainTakesTheStatisticsOnce) {
  LIFTOFF_REQUIRE_CUDA();
  SmallLayer l;
  const Tensor r = rnd({32, 16, 4, 4}, 36, -2, 2).to(DType::bf16).to(DType::f32);
  const Tensor rm = l.on_device(l.rm), rv = l.on_device(l.rv);
  const Tensor tracked = Tensor::zeros({}, DType::i64, Device::cuda());
  const Tensor xd = l.on_device(l.x).set_requires_grad(true), wd = l.on_device(l.w).set_requires_grad(true);
  const Tensor y = batch_norm2d(xd, wd, l.on_device(l.b), rm, rv, true, 0.1, 1e-5, tracked);
  const Tensor z = relu6(y + l.on_device(r));
  EXPECT_EQ(z.grad_fn()->name(), "batch_norm2d_relu6");
  sum(cast(z, DType::f32)).backward();  // Tensor::to is a plain copy; cast() is differentiable
  const Tensor xc = l.x.detach().set_requires_grad(true), wc = l.w.detach().set_requires_grad(true);
  const Tensor yc = batch_norm2d(xc, wc, l.b, l.rm, l.rv, true);
  const Tensor zc = relu6(yc + r);
  sum(zc).backward();
  EXPECT_TRUE(testing::all_close(z.to(DType::f32).to(Device::cpu()), zc, 3e-2, 3e-2));
  EXPECT_TRUE(testing::all_close(y.to(DType::f32).to(Device::cpu()), yc, 3e-2, 3e-2));
  EXPECT_TRUE(testing::all_close(rm.to(Device::cpu()), l.rm, 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(rv.to(Device::cpu()), l.rv, 1e-4, 1e-4));
  EXPECT_EQ(tracked.to_vector<int64_t>()[0], 1);
  EXPECT_TRUE(testing::all_close(wd.grad().to(Device::cpu()), wc.grad(), 1e-1, 5e-2));
  EXPECT_TRUE(testing::all_close(xd.grad().to(DType::f32).to(Device::cpu()), xc.grad(), 1e-1, 5e-2));
}

// With a residual, the channels-last split backward's sums pass writes the masked gradient (the residual's
// gradient), and the input-gradient pass reads it in place of the output gradient and the mask. In f32 every
// gradient matches the CPU's unfused reference; in bf16 (where rounding moves outputs across the mask's edge)
// the residual's gradient is gy where y > 0, bit for bit. Six channels take the scalar kernels.
TEST(BatchNormFusionCuda, ResidualGradientOfTheSplitPassesMatchesTheCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (const int64_t channels : {int64_t{32}, int64_t{6}}) {
    const Shape shape{16, channels, 12, 12};  // 2304 rows: past the one-launch kernels
    for (const DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(str_cat(dtype_name(dtype), " C = ", channels));
      const Tensor x = rnd(shape, 51).to(dtype).to(DType::f32), r = rnd(shape, 52).to(dtype).to(DType::f32);
      const Tensor w = rnd({channels}, 53, 0.5, 1.5), b = rnd({channels}, 54);
      const Tensor gy = rnd(shape, 55).to(dtype).to(DType::f32);
      const Device cuda = Device::cuda();
      const auto on_gpu = [&](const Tensor& t) {
        Tensor d = Tensor::empty(shape, dtype, cuda, MemoryFormat::channels_last);
        d.copy_(t);
        return d;
      };
      const Tensor xd = on_gpu(x).set_requires_grad(true), rd = on_gpu(r).set_requires_grad(true);
      const Tensor wd = w.to(cuda).set_requires_grad(true), bd = b.to(cuda).set_requires_grad(true);
      const Tensor y = relu(bn(xd, wd, bd) + rd);
      EXPECT_EQ(y.grad_fn()->name(), "batch_norm2d_relu");
      y.backward(on_gpu(gy));
      if (dtype == DType::bf16) {
        const std::vector<float> yv =
            y.detach().to(Device::cpu(), DType::f32).contiguous().to_vector<float>();
        const std::vector<float> gv = gy.to_vector<float>();
        std::vector<float> expected(gv.size());
        for (size_t i = 0; i < gv.size(); ++i) expected[i] = yv[i] > 0.0f ? gv[i] : 0.0f;
        EXPECT_TRUE(testing::all_close(rd.grad().to(Device::cpu(), DType::f32).contiguous(),
                                       Tensor::from_vector<float>(expected, shape), 0, 0));
        continue;
      }
      const Tensor xc = x.detach().set_requires_grad(true), rc = r.detach().set_requires_grad(true);
      const Tensor wc = w.detach().set_requires_grad(true), bc = b.detach().set_requires_grad(true);
      relu(bn(xc, wc, bc) + rc).backward(gy);
      const std::vector<std::pair<Tensor, Tensor>> pairs{{xd, xc}, {rd, rc}, {wd, wc}, {bd, bc}};
      for (size_t i = 0; i < pairs.size(); ++i) {
        EXPECT_TRUE(
            testing::all_close(pairs[i].first.grad().to(Device::cpu()), pairs[i].second.grad(), 2e-3, 2e-3))
            << "gradient " << i;
      }
    }
  }
}

// Without a residual, the channels-last split backward (rows past the one-launch kernels' 2048) recomputes
// the ReLU's mask from x (LIFTOFF_BN_MASK=auto) instead of reading the output (read): the same gradients bit
// for bit, for relu and relu6 (weights of 3-5 put many outputs at the cap), f32 and bf16; in f32 also the
// CPU's unfused reference.
TEST(BatchNormFusionCuda, MaskFromTheInputMatchesTheStoredOutputBitForBit) {
  LIFTOFF_REQUIRE_CUDA();
  const Shape shape{16, 32, 12, 12};  // 2304 rows
  for (const DType dtype : {DType::f32, DType::bf16}) {
    for (const bool six : {false, true}) {
      SCOPED_TRACE(str_cat(dtype_name(dtype), six ? " relu6" : " relu"));
      const Tensor x = rnd(shape, 41).to(dtype).to(DType::f32);
      const Tensor w = rnd({32}, 42, six ? 3.0 : 0.5, six ? 5.0 : 1.5), b = rnd({32}, 43, -1.0, 2.0);
      const Tensor gy = rnd(shape, 44).to(dtype).to(DType::f32);
      const auto activation = [six](const Tensor& t) { return six ? relu6(t) : relu(t); };
      const auto grads = [&](const char* mask) {
        const config::ScopedSetting setting(config::Knob::bn_mask, mask);
        const Device cuda = Device::cuda();
        Tensor xd = Tensor::empty(shape, dtype, cuda, MemoryFormat::channels_last);
        xd.copy_(x);
        xd.set_requires_grad(true);
        const Tensor wd = w.to(cuda).set_requires_grad(true), bd = b.to(cuda).set_requires_grad(true);
        const Tensor y = activation(bn(xd, wd, bd));
        EXPECT_EQ(y.grad_fn()->name(), six ? "batch_norm2d_relu6" : "batch_norm2d_relu");
        Tensor gyd = Tensor::empty(shape, dtype, cuda, MemoryFormat::channels_last);
        gyd.copy_(gy);
        y.backward(gyd);
        return std::vector<Tensor>{xd.grad().to(Device::cpu(), DType::f32), wd.grad().to(Device::cpu()),
                                   bd.grad().to(Device::cpu())};
      };
      const std::vector<Tensor> recomputed = grads("auto"), read = grads("read");
      const Tensor xc = x.detach().set_requires_grad(true), wc = w.detach().set_requires_grad(true),
                   bc = b.detach().set_requires_grad(true);
      activation(bn(xc, wc, bc)).backward(gy);
      const std::vector<Tensor> cpu{xc.grad(), wc.grad(), bc.grad()};
      for (size_t i = 0; i < read.size(); ++i) {
        EXPECT_TRUE(testing::all_close(recomputed[i], read[i], 0, 0)) << "gradient " << i;
        // bf16 outputs rounded up to the cap block gradients the f32 reference passes: f32 only.
        if (dtype == DType::f32) {
          EXPECT_TRUE(testing::all_close(recomputed[i], cpu[i], 2e-3, 2e-3))
              << "gradient " << i << " against the CPU";
        }
      }
    }
  }
}

}  // namespace
}  // namespace liftoff
