#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/max_pool2d/max_pool2d.h"
#include "runtime/autograd.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

// 256 distinct multiples of 1/32 in [-4, 4): exact in bf16 and f16, so the argmax (and where the gradient
// goes) cannot change with the dtype.
Tensor distinct_input(const Shape& shape) {
  std::vector<float> values;
  for (int i = 0; i < 256; ++i) values.push_back(static_cast<float>((i * 97) % 256 - 128) / 32.0f);
  return Tensor::from_vector<float>(values, shape);
}

struct Case {
  int64_t kernel, stride, padding;
};
const std::vector<Case> kCases = {{2, 2, 0}, {3, 2, 1}, {3, 1, 1}, {2, 1, 1}};

void check(DType dtype, double tol) {
  for (const Case& c : kCases) {
    const Tensor x = distinct_input({2, 2, 8, 8}).set_requires_grad(true);
    testing::ParityOptions options;
    options.atol = tol;
    options.rtol = tol;
    options.cuda_dtype = dtype;
    const int64_t k = c.kernel, s = c.stride, p = c.padding;
    EXPECT_TRUE(testing::cuda_parity(
        [k, s, p](const std::vector<Tensor>& in) { return max_pool2d(in[0], k, s, p); }, {x}, options))
        << dtype_name(dtype) << " k" << k << " s" << s << " p" << p;
  }
}

TEST(MaxPool2dCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  check(DType::f32, 0);     // same values, same summation order as the CPU
  check(DType::f64, 1e-6);  // the CPU reference sums overlapping-window gradients in f32
}

TEST(MaxPool2dCuda, MatchesCpuInHalfTypes) {
  LIFTOFF_REQUIRE_CUDA();
  // Inputs are exact; the parity weights (0.5..1.5) round to 8/11-bit mantissas in the gradient.
  check(DType::bf16, 2e-2);
  check(DType::f16, 2e-3);
}

TEST(MaxPool2dCuda, RandomLargerInput) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({8, 16, 28, 28}, 5, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return max_pool2d(in[0], 3, 2, 1); },
                                   {x}, {/*atol=*/0, /*rtol=*/0}));
}

// Channels-last input (the vectorised NHWC kernels): values and gradients against the CPU, with ties (the
// first maximum in window order wins, so the gradient goes where the CPU sends it), for channel counts that
// allow 16-byte packs in every dtype (16), only in f32 (12), and none (6), odd sizes and overlapping windows.
void check_channels_last(DType dtype, const Shape& shape, const Case& c, double tol) {
  const Device cuda = Device::cuda(0);
  // Five distinct levels: many ties in every window. Exact in every dtype.
  std::vector<float> level_values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < level_values.size(); ++i) {
    level_values[i] = static_cast<float>((i * 2654435761u >> 7) % 5) - 2.0f;
  }
  const Tensor levels = Tensor::from_vector<float>(level_values, shape);
  const Tensor gy_values = [&] {
    const Tensor probe = max_pool2d(levels, c.kernel, c.stride, c.padding);
    return testing::random_tensor(probe.shape(), 22, -1, 1, DType::f32).to(dtype).to(DType::f32);
  }();
  const Tensor x_ref = levels.clone().set_requires_grad(true);
  const Tensor y_ref = max_pool2d(x_ref, c.kernel, c.stride, c.padding);
  y_ref.backward(gy_values);

  auto channels_last = [&](const Tensor& t) {
    Tensor d = Tensor::empty(t.shape(), dtype, cuda, MemoryFormat::channels_last);
    d.copy_(t);
    return d;
  };
  const Tensor x = channels_last(levels).set_requires_grad(true);
  const Tensor y = max_pool2d(x, c.kernel, c.stride, c.padding);
  const std::string what =
      str_cat(dtype_name(dtype), " ", shape_str(shape), " k", c.kernel, " s", c.stride, " p", c.padding);
  EXPECT_TRUE(y.is_channels_last()) << what;
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f32), y_ref, 0, 0)) << what;
  const Tensor gx = y.grad_fn()->apply(channels_last(gy_values))[0];
  EXPECT_TRUE(gx.is_channels_last()) << what;
  EXPECT_TRUE(testing::all_close(gx.to(Device::cpu(), DType::f32), x_ref.grad(), tol, tol)) << what;
}

TEST(MaxPool2dCuda, ChannelsLastMatchesCpuWithTies) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Shape& shape : {Shape{2, 16, 9, 11}, Shape{2, 12, 8, 8}, Shape{3, 6, 7, 5}}) {
    for (const Case& c : kCases) {
      // f32 sums overlapping windows in the CPU's order; half types round the sums once.
      check_channels_last(DType::f32, shape, c, 0);
      check_channels_last(DType::bf16, shape, c, 2e-2);
      check_channels_last(DType::f16, shape, c, 2e-3);
    }
  }
}

TEST(MaxPool2dCuda, ChannelsLastNanWins) {
  LIFTOFF_REQUIRE_CUDA();
  std::vector<float> values(2 * 8 * 4 * 4, 1.0f);
  values[3 * 16 + 1 * 4 + 1] = NAN;           // (n 0, c 3, h 1, w 1) in NCHW order
  values[16 * 8 + 7 * 16 + 3 * 4 + 2] = NAN;  // (n 1, c 7, h 3, w 2)
  Tensor x = Tensor::from_vector<float>(values, {2, 8, 4, 4});
  Tensor xd = Tensor::empty({2, 8, 4, 4}, DType::bf16, Device::cuda(0), MemoryFormat::channels_last);
  xd.copy_(x);
  const Tensor got = max_pool2d(xd, 2, 2, 0).to(Device::cpu(), DType::f32);
  const Tensor want = max_pool2d(x, 2, 2, 0);
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(std::isnan(g[i]), std::isnan(w[i])) << i;
    if (!std::isnan(w[i])) {
      EXPECT_EQ(g[i], w[i]) << i;
    }
  }
}

}  // namespace
}  // namespace liftoff
