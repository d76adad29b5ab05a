// The broadcasting elementwise kernel's paths (ops/common/elementwise.cuh, row_indexer.h) against the CPU in
// every dtype: rows read by 16-byte packs, one value per row (column and per-channel NCHW bias), NHWC bias,
// rows that are not a multiple of the pack, a misaligned start, transposed and sliced inputs, scalars; the
// gradients (sum_to_shape over the broadcast dims) come along.
#include <gtest/gtest.h>

#include <functional>

#include "ops/binary/binary.h"
#include "ops/compare/compare.h"
#include "ops/where/where.h"
#include "tests/common/cuda_test.h"
#include "tests/ops/dtype_cases.h"

namespace liftoff {
namespace {

using Fn2 = std::function<Tensor(const Tensor&, const Tensor&)>;

struct BroadcastCase {
  const char* what;
  Shape a, b;
  // Makes the operands the op sees from the inputs (views, layouts); identity by default.
  Fn2 op = [](const Tensor& a, const Tensor& b) { return add(a, b, 0.5); };
};

// A contiguous view of t starting one element into its storage: dense but misaligned on the device.
Tensor shifted(const Tensor& t, const Shape& shape) {
  const int64_t n = shape_numel(shape);
  return t.view({t.numel()}).slice(0, 1, 1 + n).view(shape);
}

std::vector<BroadcastCase> cases() {
  return {
      {"row broadcast (packs)", {67, 64}, {64}},
      {"row broadcast, odd row", {67, 63}, {63}},
      {"column broadcast", {33, 16}, {33, 1}},
      {"NCHW bias", {3, 8, 5, 4}, {1, 8, 1, 1}},
      {"NCHW bias, odd plane", {2, 6, 3, 3}, {6, 1, 1}},
      {"NHWC bias",
       {3, 8, 5, 4},
       {8, 1, 1},
       [](const Tensor& a, const Tensor& b) {
         return mul(a.is_cuda() ? a.contiguous(MemoryFormat::channels_last) : a, b);
       }},
      {"misaligned rows",
       {1, 1000},
       {32},
       [](const Tensor& a, const Tensor& b) {
         return sub(shifted(a, {31, 32}), b);
       }},
      {"transposed operand",
       {24, 40},
       {24},
       [](const Tensor& a, const Tensor& b) {
         return div(a.permute({1, 0}), b);
       }},
      {"sliced rows",
       {20, 70},
       {64},
       [](const Tensor& a, const Tensor& b) { return maximum(a.slice(1, 3, 67), b); }},
      {"0-d tensor", {9, 40}, {}},
      {"both broadcast", {5, 1, 48}, {1, 4, 48}},
      {"many dims", {3, 1, 5, 1, 8}, {4, 1, 6, 1}},
  };
}

TEST(BroadcastPathsCuda, MatchCpuInEveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  for (const BroadcastCase& c : cases()) {
    for (const testing::DtypeCase& d : testing::all_dtype_cases(2.0)) {
      const Tensor a = testing::random_tensor(c.a, 1, 0.5, 1.5, d.cpu_dtype()).set_requires_grad(true);
      const Tensor b = testing::random_tensor(c.b, 2, 0.5, 1.5, d.cpu_dtype()).set_requires_grad(true);
      // maximum of rounded half operands may tie where the f32 reference does not: values only.
      const bool ties =
          std::string(c.what) == "sliced rows" && d.dtype != DType::f32 && d.dtype != DType::f64;
      EXPECT_TRUE(testing::cuda_parity(
          [op = c.op](const std::vector<Tensor>& in) { return op(in[0], in[1]); }, {a, b}, d.options(!ties)))
          << c.what << " " << d.name();
    }
  }
}

TEST(BroadcastPathsCuda, ScalarAndThreeInputKernels) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({6, 128}, 3, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({128}, 4, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor c = testing::random_tensor({6, 1}, 5, -1, 1, DType::f32);
  for (const testing::DtypeCase& d : testing::all_dtype_cases(2.0)) {
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) { return where(gt(in[2], 0.0), in[0] * 2.0, in[1]); }, {a, b, c},
        d.options()))
        << d.name();
  }
}

TEST(BroadcastPathsCuda, LargeRowBroadcastIsExact) {
  LIFTOFF_REQUIRE_CUDA();
  // Every element of a [4096, 1024] + [1024] sum in f32 is one rounding of the same two values on both sides.
  const Tensor a = testing::random_tensor({4096, 1024}, 6, -1, 1, DType::f32);
  const Tensor b = testing::random_tensor({1024}, 7, -1, 1, DType::f32);
  const Tensor device = add(a.to(Device::cuda()), b.to(Device::cuda())).to(Device::cpu());
  EXPECT_EQ(device.to_vector<float>(), add(a, b).to_vector<float>());
  const Tensor bias = testing::random_tensor({1, 64, 1, 1}, 8, -1, 1, DType::f32);
  const Tensor x = testing::random_tensor({8, 64, 28, 28}, 9, -1, 1, DType::f32);
  EXPECT_EQ(add(x.to(Device::cuda()), bias.to(Device::cuda())).to(Device::cpu()).to_vector<float>(),
            add(x, bias).to_vector<float>());
}

}  // namespace
}  // namespace liftoff
