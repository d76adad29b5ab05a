#include <gtest/gtest.h>

#include "ops/batch_norm2d/batch_norm2d.h"
#include "runtime/autograd.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct BnInputs {
  Tensor x, w, b, rm, rv;
};

BnInputs make_inputs(const Shape& shape, uint64_t seed) {
  const int64_t c = shape[1];
  BnInputs in;
  in.x = testing::random_tensor(shape, seed, -1, 3, DType::f32).set_requires_grad(true);
  in.w = testing::random_tensor({c}, seed + 1, 0.5, 1.5, DType::f32).set_requires_grad(true);
  in.b = testing::random_tensor({c}, seed + 2, -1, 1, DType::f32).set_requires_grad(true);
  in.rm = testing::random_tensor({c}, seed + 3, -0.5, 0.5, DType::f32);
  in.rv = testing::random_tensor({c}, seed + 4, 0.5, 2, DType::f32);
  return in;
}

TEST(BatchNorm2dCuda, TrainingMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  // Small maps with many samples (splits across blocks), and a single big plane.
  for (const Shape& shape : {Shape{64, 16, 7, 7}, Shape{32, 24, 14, 14}, Shape{2, 3, 40, 40}}) {
    const BnInputs in = make_inputs(shape, 1);
    auto fn = [](const std::vector<Tensor>& t) {
      return batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true);
    };
    // Output and input gradient.
    EXPECT_TRUE(
        testing::cuda_parity(fn, {in.x, in.w.detach(), in.b.detach()}, {/*atol=*/1e-4, /*rtol=*/1e-4}))
        << shape_str(shape);
    // Weight/bias gradients are f32 sums of thousands of terms that largely cancel (sum of gy * xhat ~ 1 from
    // terms summing to ~1e3 in magnitude): f32 accumulation leaves ~1e-7 of that magnitude.
    EXPECT_TRUE(testing::cuda_parity(fn, {in.x, in.w, in.b}, {/*atol=*/2e-3, /*rtol=*/1e-4}))
        << shape_str(shape);
  }
}

TEST(BatchNorm2dReluCuda, FusedEpilogueMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Shape& shape : {Shape{64, 16, 7, 7}, Shape{8, 32, 14, 14}}) {
    const BnInputs in = make_inputs(shape, 7);
    const Tensor residual = testing::random_tensor(shape, 99, -1, 1, DType::f32).set_requires_grad(true);
    auto fn = [](const std::vector<Tensor>& t) {
      return batch_norm2d_relu(t[0], t[1], t[2], Tensor(), Tensor(), true, 0.1, 1e-5, t[3]);
    };
    EXPECT_TRUE(testing::cuda_parity(fn, {in.x, in.w.detach(), in.b.detach(), residual},
                                     {/*atol=*/1e-4, /*rtol=*/1e-4}))
        << shape_str(shape);
    EXPECT_TRUE(testing::cuda_parity(fn, {in.x, in.w, in.b, residual}, {/*atol=*/2e-3, /*rtol=*/1e-4}))
        << shape_str(shape);
    auto no_residual = [](const std::vector<Tensor>& t) {
      return batch_norm2d_relu(t[0], t[1], t[2], Tensor(), Tensor(), true);
    };
    EXPECT_TRUE(testing::cuda_parity(no_residual, {in.x, in.w, in.b}, {/*atol=*/2e-3, /*rtol=*/1e-4}))
        << shape_str(shape);
  }
}

TEST(BatchNorm2dCuda, EvalMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const BnInputs in = make_inputs({16, 8, 5, 5}, 10);
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& t) { return batch_norm2d(t[0], t[1], t[2], t[3], t[4], false); },
      {in.x, in.w, in.b, in.rm, in.rv}, {/*atol=*/1e-5, /*rtol=*/1e-5}));
}

TEST(BatchNorm2dCuda, TrainingMatchesCpuInF64) {
  LIFTOFF_REQUIRE_CUDA();
  const BnInputs in = make_inputs({8, 4, 6, 6}, 20);
  testing::ParityOptions options;
  options.atol = 1e-11;
  options.rtol = 1e-11;
  options.cuda_dtype = DType::f64;
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& t) { return batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true); },
      {in.x.to(DType::f64).set_requires_grad(true), in.w.to(DType::f64).set_requires_grad(true),
       in.b.to(DType::f64).set_requires_grad(true)},
      options));
}

TEST(BatchNorm2dCuda, RunningStatsMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const BnInputs in = make_inputs({128, 32, 7, 7}, 30);
  const Device cuda = Device::cuda();
  const Tensor rm_cpu = in.rm.clone(), rv_cpu = in.rv.clone();
  const Tensor rm_gpu = in.rm.to(cuda), rv_gpu = in.rv.to(cuda);
  NoGradGuard no_grad;
  for (int step = 0; step < 3; ++step) {
    const Tensor x = testing::random_tensor({128, 32, 7, 7}, 40 + step, -1, 3, DType::f32);
    batch_norm2d(x, in.w, in.b, rm_cpu, rv_cpu, true, 0.1);
    batch_norm2d(x.to(cuda), in.w.to(cuda), in.b.to(cuda), rm_gpu, rv_gpu, true, 0.1);
  }
  EXPECT_TRUE(testing::all_close(rm_gpu.to(Device::cpu()), rm_cpu, 1e-5, 1e-5));
  EXPECT_TRUE(testing::all_close(rv_gpu.to(Device::cpu()), rv_cpu, 1e-5, 1e-5));
}

// num_batches_tracked counts training calls on the device (inside the statistics kernel), NCHW and
// channels-last, fused or not; eval calls leave it.
TEST(BatchNorm2dCuda, CountsTrainingBatchesOnTheDevice) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda();
  const BnInputs in = make_inputs({8, 16, 5, 5}, 50);
  const Tensor w = in.w.to(cuda), b = in.b.to(cuda), rm = in.rm.to(cuda), rv = in.rv.to(cuda);
  const Tensor count = Tensor::zeros({}, DType::i64, cuda);
  NoGradGuard no_grad;
  const Tensor x = in.x.detach().to(cuda);
  const Tensor x_cl = x.contiguous(MemoryFormat::channels_last);
  batch_norm2d(x, w, b, rm, rv, true, 0.1, 1e-5, count);
  batch_norm2d(x_cl, w, b, rm, rv, true, 0.1, 1e-5, count);
  batch_norm2d_relu(x, w, b, rm, rv, true, 0.1, 1e-5, Tensor(), count);
  batch_norm2d_relu(x_cl, w, b, rm, rv, true, 0.1, 1e-5, x_cl, count);
  batch_norm2d(x, w, b, rm, rv, false, 0.1, 1e-5, count);
  EXPECT_EQ(count.to(Device::cpu()).to_vector<int64_t>(), std::vector<int64_t>{4});
  // The CPU front counts the same way.
  const Tensor cpu_count = Tensor::zeros({}, DType::i64);
  batch_norm2d(in.x.detach(), in.w, in.b, in.rm.clone(), in.rv.clone(), true, 0.1, 1e-5, cpu_count);
  EXPECT_EQ(cpu_count.to_vector<int64_t>(), std::vector<int64_t>{1});
  EXPECT_THROW(batch_norm2d(x, w, b, rm, rv, true, 0.1, 1e-5, cpu_count), ValueError);
}

// AMP: bf16/f16 activations with f32 weight, bias and running stats. The reference is the CPU in f32 on the
// 16-bit-rounded input.
TEST(BatchNorm2dCuda, HalfInputWithF32Parameters) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda();
  for (DType dt : {DType::bf16, DType::f16}) {
    const BnInputs in = make_inputs({64, 16, 8, 8}, 50);
    const Tensor x_rounded = in.x.detach().to(dt).to(DType::f32).set_requires_grad(true);
    const Tensor w_cpu = in.w.detach().clone().set_requires_grad(true);
    const Tensor b_cpu = in.b.detach().clone().set_requires_grad(true);
    const Tensor rm_cpu = in.rm.clone(), rv_cpu = in.rv.clone();
    const Tensor y_cpu = batch_norm2d(x_rounded, w_cpu, b_cpu, rm_cpu, rv_cpu, true);

    const Tensor x_gpu = in.x.detach().to(cuda, dt).set_requires_grad(true);
    const Tensor w_gpu = in.w.detach().to(cuda).set_requires_grad(true);
    const Tensor b_gpu = in.b.detach().to(cuda).set_requires_grad(true);
    const Tensor rm_gpu = in.rm.to(cuda), rv_gpu = in.rv.to(cuda);
    const Tensor y_gpu = batch_norm2d(x_gpu, w_gpu, b_gpu, rm_gpu, rv_gpu, true);
    ASSERT_EQ(y_gpu.dtype(), dt);
    const double tol = dt == DType::bf16 ? 3e-2 : 4e-3;  // output rounding to 16 bits
    EXPECT_TRUE(testing::all_close(y_gpu.to(Device::cpu(), DType::f32), y_cpu, tol, tol)) << dtype_name(dt);
    EXPECT_TRUE(testing::all_close(rm_gpu.to(Device::cpu()), rm_cpu, 1e-5, 1e-5)) << dtype_name(dt);
    EXPECT_TRUE(testing::all_close(rv_gpu.to(Device::cpu()), rv_cpu, 1e-5, 1e-5)) << dtype_name(dt);

    const Tensor gy = testing::random_tensor(y_cpu.shape(), 60, -1, 1, DType::f32);
    const Tensor gy_rounded = gy.to(dt).to(DType::f32);
    y_cpu.backward(gy_rounded);
    y_gpu.backward(gy.to(cuda, dt));
    ASSERT_EQ(w_gpu.grad().dtype(), DType::f32);
    // Weight/bias grads are sums over 4096 elements of f32 products: compare relative to their size.
    EXPECT_TRUE(testing::all_close(w_gpu.grad().to(Device::cpu()), w_cpu.grad(), 1e-2, 1e-3))
        << dtype_name(dt);
    EXPECT_TRUE(testing::all_close(b_gpu.grad().to(Device::cpu()), b_cpu.grad(), 1e-2, 1e-3))
        << dtype_name(dt);
    EXPECT_TRUE(testing::all_close(x_gpu.grad().to(Device::cpu(), DType::f32), x_rounded.grad(), tol, tol))
        << dtype_name(dt);
  }
}

}  // namespace
}  // namespace liftoff
