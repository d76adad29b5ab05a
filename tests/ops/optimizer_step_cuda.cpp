#include <gtest/gtest.h>

#include "ops/optimizer_step/optimizer_step.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

// Enough tensors to need several launches (more than one launch's tensor slots), one tensor spanning more
// chunks than a launch holds (so it continues across launches), empty and odd-sized ones.
std::vector<Shape> test_shapes() {
  std::vector<Shape> shapes;
  for (int i = 0; i < 70; ++i) shapes.push_back({(i * 37) % 500 + 1, (i % 3) + 1});
  shapes.push_back({0});
  shapes.push_back({330 * 65536 + 17});
  shapes.push_back({65536});
  return shapes;
}

std::vector<Tensor> random_list(const std::vector<Shape>& shapes, uint64_t seed, double low, double high) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    out.push_back(testing::random_tensor(shapes[i], seed + i, low, high, DType::f32));
  }
  return out;
}

std::vector<Tensor> to_device(const std::vector<Tensor>& list, DType dtype = DType::f32) {
  std::vector<Tensor> out;
  for (const Tensor& t : list) out.push_back(t.to(Device::cuda(), dtype));
  return out;
}

::testing::AssertionResult lists_close(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu,
                                       double atol, double rtol) {
  for (size_t i = 0; i < gpu.size(); ++i) {
    auto r = testing::all_close(gpu[i].to(Device::cpu()), cpu[i], atol, rtol);
    if (!r) return ::testing::AssertionFailure() << "tensor " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

TEST(OptimizerStepCuda, SgdMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes = test_shapes();
  for (bool nesterov : {false, true}) {
    std::vector<Tensor> p_cpu = random_list(shapes, 100, -1, 1);
    std::vector<Tensor> buf_cpu;
    for (const Shape& s : shapes) buf_cpu.push_back(Tensor::zeros(s));
    std::vector<Tensor> p_gpu = to_device(p_cpu), buf_gpu = to_device(buf_cpu);
    SgdHyper h;
    h.lr = 0.05;
    h.momentum = 0.9;
    h.weight_decay = 5e-4;
    h.nesterov = nesterov;
    for (int step = 0; step < 2; ++step) {
      const std::vector<Tensor> g = random_list(shapes, 1000 + 100 * step, -1, 1);
      sgd_step(p_cpu, g, buf_cpu, h);
      sgd_step(p_gpu, to_device(g), buf_gpu, h);
    }
    // Same f32 operations per element; only FMA contraction can differ.
    EXPECT_TRUE(lists_close(p_gpu, p_cpu, 1e-6, 1e-6)) << "nesterov " << nesterov;
    EXPECT_TRUE(lists_close(buf_gpu, buf_cpu, 1e-6, 1e-6)) << "nesterov " << nesterov;
  }
}

TEST(OptimizerStepCuda, PlainSgdWithoutBuffers) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes{{10}, {3, 3}};
  std::vector<Tensor> p_cpu = random_list(shapes, 7, -1, 1);
  std::vector<Tensor> p_gpu = to_device(p_cpu);
  const std::vector<Tensor> g = random_list(shapes, 8, -1, 1);
  SgdHyper h;
  sgd_step(p_cpu, g, {}, h);
  sgd_step(p_gpu, to_device(g), {}, h);
  EXPECT_TRUE(lists_close(p_gpu, p_cpu, 1e-7, 1e-6));
}

TEST(OptimizerStepCuda, AdamWMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes = test_shapes();
  std::vector<Tensor> p_cpu = random_list(shapes, 200, -1, 1), m_cpu, v_cpu;
  for (const Shape& s : shapes) {
    m_cpu.push_back(Tensor::zeros(s));
    v_cpu.push_back(Tensor::zeros(s));
  }
  std::vector<Tensor> p_gpu = to_device(p_cpu), m_gpu = to_device(m_cpu), v_gpu = to_device(v_cpu);
  AdamWHyper h;
  h.lr = 1e-2;
  for (int step = 1; step <= 2; ++step) {
    h.step = step;
    const std::vector<Tensor> g = random_list(shapes, 2000 + 100 * step, -1, 1);
    adamw_step(p_cpu, g, m_cpu, v_cpu, h);
    adamw_step(p_gpu, to_device(g), m_gpu, v_gpu, h);
  }
  EXPECT_TRUE(lists_close(p_gpu, p_cpu, 1e-6, 1e-5));
  EXPECT_TRUE(lists_close(m_gpu, m_cpu, 1e-7, 1e-5));
  EXPECT_TRUE(lists_close(v_gpu, v_cpu, 1e-8, 1e-5));
}

// f32 master weights with bf16 gradients (AMP): the CPU reference takes the bf16 values widened to f32.
TEST(OptimizerStepCuda, AdamWWithBf16Gradients) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes{{1000}, {17, 5}, {70000}};
  std::vector<Tensor> p_cpu = random_list(shapes, 300, -1, 1), m_cpu, v_cpu;
  for (const Shape& s : shapes) {
    m_cpu.push_back(Tensor::zeros(s));
    v_cpu.push_back(Tensor::zeros(s));
  }
  std::vector<Tensor> p_gpu = to_device(p_cpu), m_gpu = to_device(m_cpu), v_gpu = to_device(v_cpu);
  const std::vector<Tensor> g = random_list(shapes, 400, -1, 1);
  std::vector<Tensor> g_rounded;
  for (const Tensor& t : g) g_rounded.push_back(t.to(DType::bf16).to(DType::f32));
  AdamWHyper h;
  adamw_step(p_cpu, g_rounded, m_cpu, v_cpu, h);
  adamw_step(p_gpu, to_device(g, DType::bf16), m_gpu, v_gpu, h);
  EXPECT_TRUE(lists_close(p_gpu, p_cpu, 1e-6, 1e-5));
  EXPECT_TRUE(lists_close(v_gpu, v_cpu, 1e-8, 1e-5));
}

TEST(OptimizerStepCuda, RejectsMixedDevices) {
  LIFTOFF_REQUIRE_CUDA();
  SgdHyper h;
  EXPECT_THROW(sgd_step({Tensor::zeros({3}, DType::f32, Device::cuda())}, {Tensor::zeros({3})}, {}, h),
               DeviceError);
}

// The multi-tensor gradient sum adds exactly as the one-tensor accumulation (accumulate_into) does, across
// several launches and a tensor continuing over launches; entries with an undefined side are left alone.
TEST(AccumulateGradientsCuda, MatchesOneTensorAccumulationExactly) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes = test_shapes();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const std::vector<Tensor> sums = to_device(random_list(shapes, 300, -1, 1), dtype);
    std::vector<Tensor> grads = to_device(random_list(shapes, 900, -1, 1), dtype);
    grads[3] = Tensor();
    std::vector<Tensor> expected;
    for (size_t i = 0; i < sums.size(); ++i) {
      expected.push_back(sums[i].clone());
      if (grads[i].defined()) accumulate_into(expected.back(), grads[i]);
    }
    accumulate_gradients(sums, grads);
    for (size_t i = 0; i < sums.size(); ++i) {
      EXPECT_EQ(sums[i].to_vector<float>(), expected[i].to_vector<float>())
          << dtype_name(dtype) << " entry " << i;
    }
  }
  // Channels-last pairs add in their shared layout.
  const Tensor sum = testing::random_tensor({2, 3, 4, 5}, 7, -1, 1, DType::f32)
                         .to(Device::cuda())
                         .contiguous(MemoryFormat::channels_last);
  const Tensor grad = testing::random_tensor({2, 3, 4, 5}, 8, -1, 1, DType::f32)
                          .to(Device::cuda())
                          .contiguous(MemoryFormat::channels_last);
  const Tensor expected = sum.clone();
  accumulate_into(expected, grad);
  accumulate_gradients({sum}, {grad});
  EXPECT_EQ(sum.to_vector<float>(), expected.to_vector<float>());
}

}  // namespace
}  // namespace liftoff
