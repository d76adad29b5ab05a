#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/reduce/reduce.h"
#include "runtime/autocast.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

testing::ParityOptions options_for(DType dt, double tol32) {
  testing::ParityOptions options;
  options.cuda_dtype = dt;
  const bool half = dt == DType::f16 || dt == DType::bf16;
  options.atol = half ? 2e-2 : (dt == DType::f64 ? 1e-10 : tol32);
  options.rtol = half ? 2e-2 : (dt == DType::f64 ? 1e-10 : tol32);
  return options;
}

TEST(ReduceCuda, SumAndMeanOverAllElements) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t n : {1, 1000, 3000001}) {  // one block, a partial block, many split blocks
    const Tensor x = testing::random_tensor({n}, 1, -1, 1, DType::f32).set_requires_grad(true);
    // The CPU sums in f64, CUDA in f32: relative error ~ sqrt(n) * 2^-24 of the absolute sum.
    EXPECT_TRUE(
        testing::cuda_parity([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x}, {1e-3, 1e-5}))
        << n;
    EXPECT_TRUE(
        testing::cuda_parity([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x}, {1e-7, 1e-5}))
        << n;
  }
}

// Shapes and dims that reach every kernel: short rows (a warp per row), long rows (a block per row, split
// across blocks), columns with a small inner size and a long extent (split), columns with a wide inner size,
// and non-adjacent dims (permuted first).
struct Case {
  Shape shape;
  std::vector<int64_t> dims;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {{64, 100}, {1}},       {{3, 50000}, {-1}},     {{20000, 12}, {0}},   {{7, 300, 130}, {1}},
      {{4, 6, 5, 3}, {0, 2}}, {{2, 3, 4, 5}, {1, 3}}, {{1000, 33}, {0, 1}}, {{17}, {0}}};
  return all;
}

TEST(ReduceCuda, ValueReductionsMatchCpuInEveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  using Fn = std::function<Tensor(const Tensor&, const std::vector<int64_t>&)>;
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"sum", [](const Tensor& x, const std::vector<int64_t>& d) { return sum(x, d); }},
      {"mean", [](const Tensor& x, const std::vector<int64_t>& d) { return mean(x, d, true); }},
      {"var", [](const Tensor& x, const std::vector<int64_t>& d) { return var(x, d); }},
      {"std", [](const Tensor& x, const std::vector<int64_t>& d) { return std(x, d, 0, true); }},
      {"norm2", [](const Tensor& x, const std::vector<int64_t>& d) { return norm(x, 2.0, d); }},
      {"norm3", [](const Tensor& x, const std::vector<int64_t>& d) { return norm(x, 3.0, d); }},
      {"logsumexp", [](const Tensor& x, const std::vector<int64_t>& d) { return logsumexp(x, d); }},
      {"amax", [](const Tensor& x, const std::vector<int64_t>& d) { return amax(x, d); }},
  };
  for (const Case& c : cases()) {
    const Tensor x32 = testing::random_tensor(c.shape, 2, -1, 1, DType::f32);
    for (const auto& [name, fn] : ops) {
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        // The CPU reference sees exactly the values the device sees: f64 inputs for the f64 run, inputs
        // rounded to 16 bits for the half runs (a sum of 20,000 rounded inputs moves by ~0.3 on its own).
        const Tensor x =
            (dt == DType::f64 ? x32.to(DType::f64) : x32.to(dt).to(DType::f32)).set_requires_grad(true);
        testing::ParityOptions options = options_for(dt, 2e-4);
        // amax of rounded inputs may pick another (tied) element: compare values only in half types.
        if (name == std::string("amax") && dt != DType::f32 && dt != DType::f64) options.check_grads = false;
        EXPECT_TRUE(testing::cuda_parity(
            [fn = fn, d = c.dims](const std::vector<Tensor>& in) { return fn(in[0], d); }, {x}, options))
            << name << " " << shape_str(c.shape) << " " << dtype_name(dt);
      }
    }
  }
}

TEST(ReduceCuda, MaxMinArgmaxMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : cases()) {
    const Tensor x = testing::random_tensor(c.shape, 3, -1, 1, DType::f32).set_requires_grad(true);
    const int64_t d = c.dims[0];
    EXPECT_TRUE(testing::cuda_parity([d](const std::vector<Tensor>& in) { return max(in[0], d).first; }, {x}))
        << shape_str(c.shape);
    EXPECT_TRUE(
        testing::cuda_parity([d](const std::vector<Tensor>& in) { return min(in[0], d, true).first; }, {x}))
        << shape_str(c.shape);
    const Tensor cx = x.detach().to(Device::cuda());
    EXPECT_EQ(argmax(cx, d).to_vector<int64_t>(), argmax(x, d).to_vector<int64_t>()) << shape_str(c.shape);
    EXPECT_EQ(argmin(cx, d, true).to_vector<int64_t>(), argmin(x, d, true).to_vector<int64_t>());
  }
  // Ties and NaN pick the first index on the device too.
  const Tensor tied = Tensor::from_vector<float>({1, 5, 5, NAN, 2, NAN}, {6}, Device::cuda());
  EXPECT_EQ(argmax(tied.slice(0, 0, 3)).item(), 1);
  EXPECT_EQ(argmax(tied).item(), 3);
}

// Column reductions (dim 0 of [rows, cols], dim 1 of [outer, extent, inner]) whose extent is split over
// blocks: merged by each tile's last block (16-byte packs, or single values for odd widths and a view one
// element into its storage) or, with many splits, by the separate merge kernel. Inputs are rounded to the
// device dtype, so the CPU sees the device's values; max's indices must match exactly (ties: the first).
TEST(ReduceCuda, SplitColumnReductionsMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  struct Column {
    Shape shape;
    int64_t dim;
    DType dtype;
    bool misaligned;
  };
  const std::vector<Column> columns = {
      {{16384, 1024}, 0, DType::bf16, false},  // packed, 64 splits merged by the last blocks
      {{16384, 1024}, 0, DType::f32, false},   // packed, 32 splits
      {{3, 5000, 40}, 1, DType::bf16, false},  // several outer slices, each with its splits
      {{900, 33}, 0, DType::f32, false},       // odd width: one value per lane, 14 splits
      {{900, 33}, 0, DType::bf16, false},
      {{300000, 16}, 0, DType::bf16, false},  // one tile, 1024 splits: the separate merge kernel
      {{40000, 33}, 0, DType::f32, false},    // odd width, many splits: the separate merge kernel
      {{16384, 64}, 0, DType::bf16, true},    // misaligned: no packs
  };
  for (const Column& c : columns) {
    const int64_t n = shape_numel(c.shape), offset = c.misaligned ? 1 : 0;
    const Tensor storage =
        testing::random_tensor({n + offset}, 21, -1, 1, DType::f32).to(c.dtype).to(DType::f32);
    const Tensor x = storage.slice(0, offset, offset + n).view(c.shape);
    const Tensor device_storage = storage.to(Device::cuda(0), c.dtype);
    const Tensor dx = device_storage.slice(0, offset, offset + n).view(c.shape);
    const bool half = c.dtype == DType::bf16;
    const double atol = half ? 1e-2 : 1e-3, rtol = half ? 1e-2 : 1e-4;
    const std::string what = shape_str(c.shape) + " dim " + std::to_string(c.dim) + " " +
                             dtype_name(c.dtype) + (c.misaligned ? " misaligned" : "");
    auto host = [](const Tensor& t) { return t.to(Device::cpu(), DType::f32); };
    EXPECT_TRUE(testing::all_close(host(sum(dx, {c.dim})), sum(x, {c.dim}), atol, rtol)) << "sum " << what;
    EXPECT_TRUE(testing::all_close(host(amin(dx, {c.dim})), amin(x, {c.dim}), 0, 0)) << "amin " << what;
    EXPECT_TRUE(testing::all_close(host(amax(dx, {c.dim})), amax(x, {c.dim}), 0, 0)) << "amax " << what;
    EXPECT_TRUE(testing::all_close(host(var(dx, {c.dim})), var(x, {c.dim}), atol, rtol)) << "var " << what;
    const auto [values, indices] = max(dx, c.dim);
    const auto [expected_values, expected_indices] = max(x, c.dim);
    EXPECT_TRUE(testing::all_close(host(values), expected_values, 0, 0)) << "max " << what;
    EXPECT_EQ(indices.to(Device::cpu()).to_vector<int64_t>(), expected_indices.to_vector<int64_t>())
        << "argmax " << what;
    // The merge order depends only on the shape: the same bits again.
    EXPECT_EQ(host(sum(dx, {c.dim})).to_vector<float>(), host(sum(dx, {c.dim})).to_vector<float>()) << what;
  }
}

TEST(ReduceCuda, ChannelsLastInput) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({4, 8, 6, 5}, 4, -1, 1, DType::f32, Device::cuda())
                       .contiguous(MemoryFormat::channels_last);
  const Tensor ref = x.to(Device::cpu());
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{0, 2, 3}, {1}, {0}, {2, 3}}) {
    EXPECT_TRUE(testing::all_close(sum(x, dims).to(Device::cpu()), sum(ref, dims), 1e-4, 1e-5));
    EXPECT_TRUE(
        testing::all_close(var(x, dims, 1, true).to(Device::cpu()), var(ref, dims, 1, true), 1e-4, 1e-4));
  }
}

TEST(ReduceCuda, AutocastReductionsReturnF32) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = Tensor::ones({4, 8}, DType::bf16, Device::cuda());
  EXPECT_EQ(sum(x, {1}).dtype(), DType::bf16);
  AutocastGuard autocast(DType::bf16);
  EXPECT_EQ(sum(x, {1}).dtype(), DType::f32);
  EXPECT_EQ(logsumexp(x, {1}).dtype(), DType::f32);
  EXPECT_EQ(amax(x, {1}).dtype(), DType::bf16);
}

TEST(ReduceCuda, Deterministic) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({1 << 22}, 3, -1, 1, DType::f32, Device::cuda());
  const double first = sum(x).item();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sum(x).item(), first);
  const Tensor cols = x.view({1 << 16, 64});
  const std::vector<float> by_column = sum(cols, {0}).to_vector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sum(cols, {0}).to_vector<float>(), by_column);
  const std::vector<float> v = var(cols, {1}).to_vector<float>();
  EXPECT_EQ(var(cols, {1}).to_vector<float>(), v);
}

}  // namespace
}  // namespace liftoff
