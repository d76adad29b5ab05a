// ema_update / swap_contents on CUDA against the CPU kernels: many tensors (several launches), one spanning
// more chunks than a launch holds, an empty one; f32 and f64.
#include <gtest/gtest.h>

#include "ops/ema/ema.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

std::vector<Shape> test_shapes() {
  std::vector<Shape> shapes;
  for (int i = 0; i < 80; ++i) shapes.push_back({(i * 37) % 500 + 1, (i % 3) + 1});
  shapes.push_back({0});
  shapes.push_back({330 * 65536 + 17});
  return shapes;
}

std::vector<Tensor> random_list(const std::vector<Shape>& shapes, uint64_t seed, DType dtype) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < shapes.size(); ++i)
    out.push_back(testing::random_tensor(shapes[i], seed + i, -2, 2, dtype));
  return out;
}

std::vector<Tensor> to_cuda(const std::vector<Tensor>& list) {
  std::vector<Tensor> out;
  for (const Tensor& t : list) out.push_back(t.to(Device::cuda()));
  return out;
}

void expect_lists_equal(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu, double atol) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) {
    EXPECT_TRUE(testing::all_close(gpu[i].to(Device::cpu()), cpu[i], atol, 0)) << "tensor " << i;
  }
}

TEST(EmaCuda, UpdateMatchesTheCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (const DType dtype : {DType::f32, DType::f64}) {
    const std::vector<Shape> shapes = test_shapes();
    const std::vector<Tensor> avg = random_list(shapes, 1, dtype), cur = random_list(shapes, 500, dtype);
    const std::vector<Tensor> avg_gpu = to_cuda(avg), cur_gpu = to_cuda(cur);
    for (const double decay : {0.999, 0.5}) {
      ema_update(avg, cur, decay);
      ema_update(avg_gpu, cur_gpu, decay);
    }
    // Same two products and one add per element; f32 may contract to an FMA on the device.
    expect_lists_equal(avg_gpu, avg, dtype == DType::f32 ? 1e-6 : 1e-14);
    expect_lists_equal(cur_gpu, cur, 0);  // the weights are only read
  }
}

TEST(EmaCuda, SwapExchangesEveryTensor) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes = test_shapes();
  const std::vector<Tensor> a = random_list(shapes, 3, DType::f32), b = random_list(shapes, 900, DType::f32);
  const std::vector<Tensor> a_gpu = to_cuda(a), b_gpu = to_cuda(b);
  swap_contents(a_gpu, b_gpu);
  expect_lists_equal(a_gpu, b, 0);
  expect_lists_equal(b_gpu, a, 0);
}

}  // namespace
}  // namespace liftoff
