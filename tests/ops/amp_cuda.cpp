#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/amp/amp.h"
#include "ops/optimizer_step/optimizer_step.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

Tensor device_f32(double value) {
  return Tensor::full({1}, value, DType::f32, Device::cuda());
}

std::vector<Tensor> to_device(const std::vector<Tensor>& list, DType dtype = DType::f32) {
  std::vector<Tensor> out;
  for (const Tensor& t : list) out.push_back(t.to(Device::cuda(), dtype));
  return out;
}

// Bit-identical after the round trip to the host (same dtype on both sides).
bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
  return ha.dtype() == hb.dtype() && ha.nbytes() == hb.nbytes() &&
         std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

// Several launches by tensor count (more than one launch's 110 slots for one list), one tensor spanning more
// chunks than a launch holds (so it continues across launches), empty and odd-sized ones.
std::vector<Shape> many_shapes() {
  std::vector<Shape> shapes;
  for (int i = 0; i < 150; ++i) shapes.push_back({(i * 37) % 500 + 1, (i % 3) + 1});
  shapes.push_back({0});
  shapes.push_back({330 * 65536 + 17});
  shapes.push_back({65536});
  return shapes;
}

std::vector<Tensor> random_list(const std::vector<Shape>& shapes, uint64_t seed) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    out.push_back(testing::random_tensor(shapes[i], seed + i, -1, 1, DType::f32));
  }
  return out;
}

TEST(ScaleByCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({5, 129}, 1, -1, 1, DType::f32).set_requires_grad(true);
  const auto fn = [](const std::vector<Tensor>& in) {
    return scale_by(in[0], Tensor::full({1}, 65536.0, DType::f32, in[0].device()));
  };
  EXPECT_TRUE(testing::cuda_parity(fn, {x}, {/*atol=*/0, /*rtol=*/0}));
  for (DType half : {DType::f16, DType::bf16}) {
    testing::ParityOptions options;
    options.atol = 1e-2;
    options.rtol = 1e-2;
    options.cuda_dtype = half;
    const auto small = [](const std::vector<Tensor>& in) {
      return scale_by(in[0], Tensor::full({1}, 0.375, DType::f32, in[0].device()));
    };
    EXPECT_TRUE(testing::cuda_parity(small, {x}, options)) << dtype_name(half);
  }
}

TEST(ScaleByCuda, RejectsFactorOnTheHost) {
  LIFTOFF_REQUIRE_CUDA();
  EXPECT_THROW(scale_by(Tensor::ones({3}, DType::f32, Device::cuda()), Tensor::full({1}, 2.0)), DeviceError);
}

TEST(UnscaleAndCheckCuda, MatchesCpuInEveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes = many_shapes();
  const std::vector<Tensor> values = random_list(shapes, 500);
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    std::vector<Tensor> cpu;
    for (const Tensor& t : values) cpu.push_back(t.to(dtype).clone());  // never `values` itself
    std::vector<Tensor> gpu = to_device(cpu, dtype);
    const Tensor found_cpu = Tensor::zeros({1}), found_gpu = device_f32(0.0);
    unscale_and_check(cpu, Tensor::full({1}, 1.0 / 3.0), found_cpu);
    unscale_and_check(gpu, device_f32(1.0 / 3.0), found_gpu);
    EXPECT_EQ(found_gpu.item(), 0.0) << dtype_name(dtype);
    // Same multiply in the same precision and the same rounding on both sides.
    for (size_t i = 0; i < shapes.size(); ++i) {
      ASSERT_TRUE(same_bits(gpu[i], cpu[i])) << dtype_name(dtype) << " tensor " << i;
    }
  }
}

TEST(UnscaleAndCheckCuda, FindsInfAndNaNInLaterLaunches) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes = many_shapes();
  const std::vector<Tensor> values = random_list(shapes, 600);
  const size_t big = shapes.size() - 2;
  struct Plant {
    size_t tensor;
    int64_t index;
    float value;
  };
  const Plant plants[] = {
      {140, 0, std::numeric_limits<float>::quiet_NaN()},  // in the second launch by tensor count
      {big, 330 * 65536 + 16, std::numeric_limits<float>::infinity()},  // the big tensor's last chunk
      {big, 5, -std::numeric_limits<float>::infinity()},                // its first chunk
      {0, 0, std::numeric_limits<float>::quiet_NaN()},
  };
  for (DType dtype : {DType::f32, DType::f16}) {
    for (const Plant& plant : plants) {
      std::vector<Tensor> host;
      for (const Tensor& t : values) host.push_back(t.clone());
      host[plant.tensor].data<float>()[plant.index] = plant.value;
      std::vector<Tensor> gpu = to_device(host, dtype);
      const Tensor found = device_f32(0.0);
      unscale_and_check(gpu, device_f32(0.5), found);
      EXPECT_EQ(found.item(), 1.0) << dtype_name(dtype) << " tensor " << plant.tensor << " index "
                                   << plant.index;
    }
  }
}

TEST(UpdateScaleCuda, GrowsBacksOffAndCounts) {
  LIFTOFF_REQUIRE_CUDA();
  for (DType tracker_dtype : {DType::i32, DType::i64}) {
    const Tensor scale = device_f32(1024.0);
    const Tensor tracker = Tensor::zeros({1}, tracker_dtype, Device::cuda());
    const Tensor skipped = Tensor::zeros({1}, DType::i64, Device::cuda());
    const Tensor clean = device_f32(0.0), inf = device_f32(1.0);
    // clean x3 -> grow; clean x2, inf -> backoff and reset; clean x2 -> no growth yet.
    for (const Tensor* f : {&clean, &clean, &clean, &clean, &clean, &inf, &clean, &clean}) {
      update_scale(scale, tracker, *f, 2.0, 0.5, 3, skipped);
    }
    EXPECT_EQ(scale.item(), 1024.0) << dtype_name(tracker_dtype);
    EXPECT_EQ(tracker.item(), 2.0);
    EXPECT_EQ(skipped.item(), 1.0);
    update_scale(scale, tracker, clean, 2.0, 0.5, 3, skipped);
    EXPECT_EQ(scale.item(), 2048.0);
    EXPECT_EQ(tracker.item(), 0.0);
    const Tensor inv = device_f32(0.0);
    inverse_scale(scale, inv);
    EXPECT_EQ(inv.item(), 1.0 / 2048.0);
  }
}

// Momentum SGD and AdamW with the flag set on the device: nothing moves, across several launches.
TEST(OptimizerSkipFlagCuda, LeavesParamsAndStateBitIdentical) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes = many_shapes();
  const std::vector<Tensor> params = to_device(random_list(shapes, 700));
  const std::vector<Tensor> grads = to_device(random_list(shapes, 800));
  std::vector<Tensor> state;
  for (const Shape& s : shapes) state.push_back(Tensor::full(s, 0.25, DType::f32, Device::cuda()));
  std::vector<Tensor> params0, state0;
  for (const Tensor& t : params) params0.push_back(t.clone());
  for (const Tensor& t : state) state0.push_back(t.clone());
  SgdHyper sgd;
  sgd.momentum = 0.9;
  sgd_step(params, grads, state, sgd, device_f32(1.0));
  AdamWHyper adam;
  adam.step = 2;
  std::vector<Tensor> v;
  for (const Shape& s : shapes) v.push_back(Tensor::full(s, 0.5, DType::f32, Device::cuda()));
  adamw_step(params, grads, state, v, adam, device_f32(std::nan("")));
  // f16 gradients with f32 master weights take the other kernel instantiation.
  sgd_step(params, to_device(random_list(shapes, 800), DType::f16), state, sgd, device_f32(1.0));
  for (size_t i = 0; i < shapes.size(); ++i) {
    ASSERT_TRUE(same_bits(params[i], params0[i])) << "tensor " << i;
    ASSERT_TRUE(same_bits(state[i], state0[i])) << "tensor " << i;
    ASSERT_TRUE(same_bits(v[i], Tensor::full(shapes[i], 0.5))) << "tensor " << i;
  }
  // A zero flag is an ordinary step, bit for bit.
  std::vector<Tensor> ref_params, ref_state;
  for (const Tensor& t : params) ref_params.push_back(t.clone());
  for (const Tensor& t : state) ref_state.push_back(t.clone());
  sgd_step(ref_params, grads, ref_state, sgd);
  sgd_step(params, grads, state, sgd, device_f32(0.0));
  for (size_t i = 0; i < shapes.size(); ++i) {
    ASSERT_TRUE(same_bits(params[i], ref_params[i])) << "tensor " << i;
    ASSERT_TRUE(same_bits(state[i], ref_state[i])) << "tensor " << i;
  }
  EXPECT_FALSE(same_bits(params[0], params0[0]));
}

TEST(OptimizerSkipFlagCuda, RejectsFlagOnAnotherDevice) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor p = Tensor::zeros({3}, DType::f32, Device::cuda()),
               g = Tensor::ones({3}, DType::f32, Device::cuda());
  SgdHyper h;
  EXPECT_THROW(sgd_step({p}, {g}, {}, h, Tensor::zeros({1})), DeviceError);
}

}  // namespace
}  // namespace liftoff
