// Every layer norm backward variant (ops/layer_norm/backward_variant.h) against the CPU reference, forward
// and backward, in bf16, f16 and f32: rows of 1024 and 4096 values (the measured widths), 768 and 520
// (tiles partly empty), 1000 (a partial last pack column of the tile), and rows that take the tile
// kernel whatever the variant (33: scalar loads; 4100: past the variants' 4096; a view one element into its
// storage: misaligned). Rows are no multiple of the groups, and enough that each group strides over several
// rounds; weight and bias, weight only, and neither. Deterministic: a second run gives the same bits.
#include <gtest/gtest.h>

#include <vector>

#include "ops/layer_norm/backward_variant.h"
#include "ops/layer_norm/layer_norm.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

constexpr LayerNormBackward kVariants[] = {LayerNormBackward::automatic, LayerNormBackward::tile,
                                           LayerNormBackward::packed, LayerNormBackward::two_rows,
                                           LayerNormBackward::wide};

// Sets the variant for a scope (back to automatic after, even when an expectation throws).
class VariantGuard {
 public:
  explicit VariantGuard(LayerNormBackward variant) { set_layer_norm_backward(variant); }
  ~VariantGuard() { set_layer_norm_backward(LayerNormBackward::automatic); }
  VariantGuard(const VariantGuard&) = delete;
  VariantGuard& operator=(const VariantGuard&) = delete;
};

enum class Affine { both, weight_only, none };

struct Rows {
  int64_t rows, cols;
  Affine affine = Affine::both;
  bool misaligned = false;
};

struct Tolerance {
  double atol, rtol;
};

Tolerance tolerance_of(DType dtype) {
  if (dtype == DType::bf16) return {3e-2, 2e-2};
  if (dtype == DType::f16) return {1e-2, 1e-2};
  return {1e-4, 1e-4};
}

// y, grad x, grad weight, grad bias (those that exist) as f32 on the CPU. Inputs are rounded to `dtype`
// first, so the CPU reference (f32) sees the device's values.
std::vector<Tensor> run(const Rows& c, DType dtype, Device device) {
  auto rounded = [&](const Shape& shape, uint64_t seed, double low, double high) {
    return testing::random_tensor(shape, seed, low, high, DType::f32).to(dtype).to(DType::f32);
  };
  const int64_t offset = c.misaligned ? 1 : 0;
  const DType run_dtype = device.is_cpu() ? DType::f32 : dtype;
  const Tensor storage = rounded({c.rows * c.cols + offset}, 21, -2, 3).to(device, run_dtype);
  Tensor x = storage.slice(0, offset, offset + c.rows * c.cols).view({c.rows, c.cols});
  x.set_requires_grad(true);
  Tensor w, b;
  if (c.affine != Affine::none) {
    w = rounded({c.cols}, 22, 0.5, 1.5).to(device, run_dtype);
    w.set_requires_grad(true);
  }
  if (c.affine == Affine::both) {
    b = rounded({c.cols}, 23, -1, 1).to(device, run_dtype);
    b.set_requires_grad(true);
  }
  const Tensor y = layer_norm(x, {c.cols}, w, b);
  y.backward(rounded({c.rows, c.cols}, 24, -1, 1).to(device, run_dtype));
  std::vector<Tensor> out = {y, x.grad()};
  if (w.defined()) out.push_back(w.grad());
  if (b.defined()) out.push_back(b.grad());
  for (Tensor& t : out) t = t.to(Device::cpu(), DType::f32);
  return out;
}

std::string describe(const Rows& c, DType dtype, LayerNormBackward variant, size_t output) {
  const char* names[] = {"y", "grad x", "grad weight", "grad bias"};
  return str_cat(layer_norm_backward_name(variant), " ", dtype_name(dtype), " ", c.rows, "x", c.cols,
                 c.affine == Affine::both          ? " affine"
                 : c.affine == Affine::weight_only ? " weight only"
                                                   : "",
                 c.misaligned ? " misaligned" : "", ": ", names[output]);
}

void expect_every_variant_matches_cpu(DType dtype, const std::vector<Rows>& cases) {
  const Tolerance tol = tolerance_of(dtype);
  for (const Rows& c : cases) {
    const std::vector<Tensor> expected = run(c, dtype, Device::cpu());
    for (LayerNormBackward variant : kVariants) {
      VariantGuard guard(variant);
      const std::vector<Tensor> actual = run(c, dtype, Device::cuda(0));
      ASSERT_EQ(actual.size(), expected.size());
      for (size_t k = 0; k < expected.size(); ++k)
        EXPECT_TRUE(testing::all_close(actual[k], expected[k], tol.atol, tol.rtol))
            << describe(c, dtype, variant, k);
      const std::vector<Tensor> again = run(c, dtype, Device::cuda(0));
      for (size_t k = 1; k < expected.size(); ++k)
        EXPECT_EQ(again[k].to_vector<float>(), actual[k].to_vector<float>())
            << "not deterministic: " << describe(c, dtype, variant, k);
    }
  }
}

// The widths the variants take (16-byte packs, 513..4096 values) and the ones that fall back.
const std::vector<Rows> kCases = {{4501, 1024},
                                  {1301, 4096},
                                  {2503, 768, Affine::weight_only},
                                  {2999, 1000},
                                  {3001, 520},
                                  {5, 1024},
                                  {3, 4096},
                                  {4001, 33},
                                  {301, 4100},
                                  {2501, 1024, Affine::none},
                                  {2500, 1024, Affine::both, true}};

TEST(LayerNormVariantsCuda, EveryVariantMatchesCpuBf16) {
  LIFTOFF_REQUIRE_CUDA();
  expect_every_variant_matches_cpu(DType::bf16, kCases);
}

TEST(LayerNormVariantsCuda, EveryVariantMatchesCpuF16) {
  LIFTOFF_REQUIRE_CUDA();
  expect_every_variant_matches_cpu(DType::f16, kCases);
}

// f32 takes the tile kernel whatever the variant; the setting must not change that.
TEST(LayerNormVariantsCuda, EveryVariantMatchesCpuF32) {
  LIFTOFF_REQUIRE_CUDA();
  expect_every_variant_matches_cpu(DType::f32, {{4501, 1024}, {1301, 4096}, {2999, 1000}, {301, 4100}});
}

// The variants sum the rows in another order than the tile kernel, so their 16-bit weight gradients may
// differ in the last bit, but no more than the tolerance from each other (a cross-check that needs no CPU
// rounding argument).
TEST(LayerNormVariantsCuda, VariantsAgreeWithEachOtherBf16) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Rows& c : {Rows{6007, 1024}, Rows{1999, 4096}}) {
    std::vector<Tensor> tile;
    {
      VariantGuard guard(LayerNormBackward::tile);
      tile = run(c, DType::bf16, Device::cuda(0));
    }
    for (LayerNormBackward variant :
         {LayerNormBackward::packed, LayerNormBackward::two_rows, LayerNormBackward::wide}) {
      VariantGuard guard(variant);
      const std::vector<Tensor> other = run(c, DType::bf16, Device::cuda(0));
      for (size_t k = 0; k < tile.size(); ++k)
        EXPECT_TRUE(testing::all_close(other[k], tile[k], 2e-2, 1e-2))
            << describe(c, DType::bf16, variant, k);
    }
  }
}

}  // namespace
}  // namespace liftoff
