#include <gtest/gtest.h>

#include "ops/optimizer_step/optimizer_step.h"
#include "runtime/graph.h"
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

// AdamW state of one list of shapes, on the CPU or on the GPU, with per-parameter i64 update counts.
struct AdamWState {
  std::vector<Tensor> p, m, v, counts;
};

AdamWState adamw_state(const std::vector<Shape>& shapes, uint64_t seed, Device device,
                       DType dtype = DType::f32) {
  AdamWState s;
  for (size_t i = 0; i < shapes.size(); ++i) {
    s.p.push_back(testing::random_tensor(shapes[i], seed + i, -1, 1, dtype).to(device));
    s.m.push_back(Tensor::zeros(shapes[i], dtype, device));
    s.v.push_back(Tensor::zeros(shapes[i], dtype, device));
    s.counts.push_back(Tensor::zeros({}, DType::i64, device));
  }
  return s;
}

void counted_step(AdamWState& s, const std::vector<Tensor>& grads, AdamWHyper h,
                  const Tensor& skip = Tensor()) {
  h.step_counts = s.counts;
  adamw_step(s.p, grads, s.m, s.v, h, skip);
}

void expect_counts(const AdamWState& s, int64_t expected) {
  for (size_t i = 0; i < s.counts.size(); ++i) {
    EXPECT_EQ(s.counts[i].to_vector<int64_t>(), std::vector<int64_t>{expected}) << "count " << i;
  }
}

// Counts on the device: the kernels advance them and compute the bias corrections there (several launches,
// a tensor spanning launches, an empty one).
TEST(OptimizerStepCuda, AdamWDeviceCountsMatchTheCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes = test_shapes();
  AdamWState cpu = adamw_state(shapes, 500, Device::cpu());
  AdamWState gpu = adamw_state(shapes, 500, Device::cuda());
  AdamWHyper h;
  h.lr = 1e-2;
  h.weight_decay = 0.05;
  for (int step = 1; step <= 3; ++step) {
    const std::vector<Tensor> g = random_list(shapes, 3000 + 100 * step, -1, 1);
    counted_step(cpu, g, h);
    counted_step(gpu, to_device(g), h);
  }
  expect_counts(gpu, 3);
  EXPECT_TRUE(lists_close(gpu.p, cpu.p, 1e-6, 1e-5));
  EXPECT_TRUE(lists_close(gpu.v, cpu.v, 1e-8, 1e-5));
}

// The device's bias corrections against the host's (the path without counts): the same double operations,
// pow() aside (CUDA's may differ by an ulp of the double), so within an f32 ulp of the update.
TEST(OptimizerStepCuda, AdamWDeviceCountsAgreeWithHostScalars) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes{{1000}, {17, 5}, {70000}};
  for (DType dtype : {DType::f32, DType::f64}) {
    AdamWState counted = adamw_state(shapes, 600, Device::cuda(), dtype);
    AdamWState host = adamw_state(shapes, 600, Device::cuda(), dtype);
    AdamWHyper h;
    h.lr = 3e-3;
    for (int step = 1; step <= 5; ++step) {
      std::vector<Tensor> g;
      for (size_t i = 0; i < shapes.size(); ++i)
        g.push_back(testing::random_tensor(shapes[i], 4000 + 10 * step + i, -1, 1, dtype).to(Device::cuda()));
      counted_step(counted, g, h);
      h.step = step;
      adamw_step(host.p, g, host.m, host.v, h);
    }
    const double tol = dtype == DType::f32 ? 2e-7 : 1e-15;
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_TRUE(testing::all_close(counted.p[i].to(Device::cpu()), host.p[i].to(Device::cpu()), tol, tol))
          << dtype_name(dtype) << " tensor " << i;
      EXPECT_TRUE(testing::all_close(counted.v[i].to(Device::cpu()), host.v[i].to(Device::cpu()), 0, 0));
    }
  }
}

// AMP's found_inf on the device: a skipped step advances no count (PyTorch skips optimizer.step()).
TEST(OptimizerStepCuda, AdamWSkippedStepKeepsTheDeviceCounts) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes{{100}, {3, 7}};
  AdamWState s = adamw_state(shapes, 700, Device::cuda());
  const std::vector<Tensor> g = to_device(random_list(shapes, 800, -1, 1));
  AdamWHyper h;
  const Tensor flag = Tensor::zeros({1}, DType::f32, Device::cuda());
  counted_step(s, g, h, flag);
  expect_counts(s, 1);
  const Tensor before = s.p[0].to(Device::cpu());
  flag.fill_(1.0);
  counted_step(s, g, h, flag);
  expect_counts(s, 1);
  EXPECT_TRUE(testing::all_close(s.p[0].to(Device::cpu()), before, 0, 0));
  flag.fill_(0.0);
  counted_step(s, g, h, flag);
  expect_counts(s, 2);
}

// One captured step replayed: the counts advance at every replay and the learning rate is read from the
// device, so the replays equal eager steps bit for bit.
TEST(OptimizerStepCuda, AdamWWithDeviceCountsReplaysInAGraph) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes{{1000}, {17, 5}, {70000}};
  AdamWState eager = adamw_state(shapes, 900, Device::cuda());
  AdamWState graphed = adamw_state(shapes, 900, Device::cuda());
  const std::vector<Tensor> g = to_device(random_list(shapes, 950, -1, 1));
  AdamWHyper h;
  h.weight_decay = 0.1;
  h.lr_tensor = Tensor::full({1}, 1e-2, DType::f64, Device::cuda());
  CudaGraph graph(Device::cuda());
  graph.begin_capture();
  try {
    counted_step(graphed, g, h);
  } catch (...) {
    graph.abort_capture();
    throw;
  }
  graph.end_capture();
  expect_counts(graphed, 0);  // nothing ran yet
  for (double lr : {1e-2, 5e-3, 2e-3, 1e-3}) {
    h.lr_tensor.fill_(lr);
    graph.replay();
    AdamWHyper eager_h = h;
    eager_h.lr_tensor = Tensor();
    eager_h.lr = lr;
    counted_step(eager, g, eager_h);
  }
  expect_counts(graphed, 4);
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_TRUE(testing::all_close(graphed.p[i].to(Device::cpu()), eager.p[i].to(Device::cpu()), 0, 0));
    EXPECT_TRUE(testing::all_close(graphed.m[i].to(Device::cpu()), eager.m[i].to(Device::cpu()), 0, 0));
  }
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
