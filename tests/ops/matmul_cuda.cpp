#include <gtest/gtest.h>

#include "ops/attention/attention.h"
#include "ops/linear/linear.h"
#include "ops/matmul/batched.h"
#include "ops/matmul/matmul.h"
#include "ops/reshape/reshape.h"
#include "ops/views/views.h"
#include "runtime/autocast.h"
#include "runtime/config.h"
#include "tests/common/cuda_test.h"
#if LIFTOFF_WITH_CUDA
#include "ops/matmul/gemm_search.h"
#include "runtime/cuda/cublaslt_loader.h"
#endif
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  Shape a, b;
  bool transpose_a, transpose_b;  // pass the operand as a transposed view of its stored transpose
};
const std::vector<Case> kCases = {
    {{33}, {33}, false, false},
    {{17, 33}, {33}, false, false},
    {{33}, {33, 9}, false, false},
    {{17, 33}, {33, 9}, true, false},
    {{3, 17, 33}, {33, 9}, false, true},
    {{17, 33}, {3, 33, 9}, true, true},
    {{3, 17, 33}, {3, 33, 9}, true, false},
    {{2, 1, 17, 33}, {3, 33, 9}, false, true},
    {{4, 17, 8}, {8}, false, false},
};

Tensor maybe_transposed(const Tensor& t, bool transpose) {
  if (!transpose || t.dim() < 2) return t;
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::swap(order[order.size() - 1], order[order.size() - 2]);
  return t.permute(order).contiguous().permute(order);  // differentiable: the gradient reaches the leaf
}

::testing::AssertionResult parity_for(const Case& c, DType dtype, double atol, double rtol) {
  const Tensor a = testing::random_tensor(c.a, 1, -1, 1).set_requires_grad(true);
  const Tensor b = testing::random_tensor(c.b, 2, -1, 1).set_requires_grad(true);
  testing::ParityOptions options;
  options.atol = atol;
  options.rtol = rtol;
  options.cuda_dtype = dtype;
  return testing::cuda_parity(
      [c](const std::vector<Tensor>& in) {
        return matmul(maybe_transposed(in[0], c.transpose_a), maybe_transposed(in[1], c.transpose_b));
      },
      {a, b}, options);
}

TEST(MatmulCuda, ShapesMatchCpuInEveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    const std::string what = shape_str(c.a) + " @ " + shape_str(c.b);
    // f32 without TF32: only the summation order differs from the f64 reference.
    EXPECT_TRUE(parity_for(c, DType::f32, 1e-5, 1e-4)) << what;
    EXPECT_TRUE(parity_for(c, DType::f64, 1e-12, 1e-12)) << what;
    // Inputs and outputs rounded to 16 bits, sums of up to 33 (forward) or 27 (gradients) terms in f32.
    EXPECT_TRUE(parity_for(c, DType::f16, 2e-2, 1e-2)) << what;
    EXPECT_TRUE(parity_for(c, DType::bf16, 1e-1, 3e-2)) << what;
  }
}

TEST(MatmulCuda, BmmAndNdLinearMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({4, 9, 16}, 3).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4, 16, 5}, 4).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); }, {a, b},
                                   {/*atol=*/1e-5, /*rtol=*/1e-4}));
  const Tensor x = testing::random_tensor({2, 3, 7, 16}, 5).set_requires_grad(true);
  const Tensor w = testing::random_tensor({6, 16}, 6).set_requires_grad(true);
  const Tensor bias = testing::random_tensor({6}, 7).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                                   {x, w, bias}, {/*atol=*/1e-5, /*rtol=*/1e-4}));
  // A non-contiguous N-D input (copied once before the GEMM).
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) {
        return linear(in[0].permute({1, 0, 2, 3}), in[1], in[2]);
      },
      {x, w, bias}, {/*atol=*/1e-5, /*rtol=*/1e-4}));
}

// The heads of one [N, L, 3 * E] projection as [N, H, L, D] views (batch entries not one stride apart): the
// GEMMs read them through arrays of matrix addresses instead of copies, and attention's plain path (f32, f64)
// writes its output and gradients in the projection's order. Forward and gradients match the CPU in every
// dtype, and no operand is copied.
TEST(MatmulCuda, HeadsOfOneProjectionMatchCpuWithoutCopies) {
  LIFTOFF_REQUIRE_CUDA();
  const int64_t heads = 3, d = 8, e = heads * d;
  const Tensor proj = testing::random_tensor({4, 9, 3 * e}, 31, -1, 1).set_requires_grad(true);
  const auto heads_of = [=](const Tensor& p, int64_t i) {
    return transpose(unflatten(slice(p, 2, i * e, (i + 1) * e), 2, {heads, d}), 1, 2);
  };
  const auto products = [=](const std::vector<Tensor>& in) {
    const Tensor scores = matmul(heads_of(in[0], 0), transpose(heads_of(in[0], 1), 2, 3));
    return matmul(scores, heads_of(in[0], 2));
  };
  const auto attention = [=](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention(heads_of(in[0], 0), heads_of(in[0], 1), heads_of(in[0], 2));
  };
  struct Tolerance {
    DType dtype;
    double atol, rtol;
  };
  for (const Tolerance t : {Tolerance{DType::f32, 1e-5, 1e-4}, Tolerance{DType::f64, 1e-12, 1e-12},
                            Tolerance{DType::f16, 5e-2, 2e-2}, Tolerance{DType::bf16, 2e-1, 5e-2}}) {
    testing::ParityOptions options;
    options.atol = t.atol;
    options.rtol = t.rtol;
    options.cuda_dtype = t.dtype;
    EXPECT_TRUE(testing::cuda_parity(products, {proj}, options)) << dtype_name(t.dtype);
    if (t.dtype == DType::f32 || t.dtype == DType::f64) {  // half dtypes take the fused paths
      EXPECT_TRUE(testing::cuda_parity(attention, {proj}, options)) << dtype_name(t.dtype);
    }
  }
  const Tensor p = proj.detach().to(Device::cuda(0));
  const int64_t copies = matmul_detail::operand_copies();
  const Tensor out = attention({p});
  EXPECT_TRUE(transpose(out, 1, 2).is_contiguous()) << shape_str(out.strides());
  EXPECT_EQ(matmul_detail::operand_copies(), copies);
}

// Products of 8 GFLOP and more (forward and both gradients here: 2 x 512 x 2048 x 2048) run on the handle
// with its own large workspace (split-K kernels may be chosen): still the CPU's result, in f32 and bf16.
TEST(MatmulCuda, LargeGemmsOnTheirWorkspaceMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({2, 512, 2048}, 8, -1, 1).set_requires_grad(true);
  const Tensor b = testing::random_tensor({2, 2048, 2048}, 9, -1, 1).set_requires_grad(true);
  const auto product = [](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); };
  // Sums of 2048 (forward) or 512-2048 (gradients) terms of size up to 1.
  EXPECT_TRUE(testing::cuda_parity(product, {a, b}, {/*atol=*/2e-3, /*rtol=*/1e-4}));
  testing::ParityOptions half;
  half.atol = 1.0;
  half.rtol = 3e-2;
  half.cuda_dtype = DType::bf16;
  EXPECT_TRUE(testing::cuda_parity(product, {a, b}, half));
}

// The large-GEMM search (ops/matmul/gemm_search.h) against cuBLAS's own pick, on the same operands: a batch
// broadcast (one operand read by every batch entry), a transposed operand, and a second call of the searched
// shape (the kept choice). Bits may differ (another kernel, another summation order), values may not.
TEST(MatmulCuda, SearchedLargeGemmsMatchCublasPick) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  if (!cuda::cublaslt_loaded()) GTEST_SKIP() << "cuBLASLt not loaded: " << cuda::cublaslt_load_error();
  for (const DType dtype : {DType::f32, DType::bf16}) {
    const Tensor a = testing::random_tensor({4, 512, 2048}, 11, -1, 1, dtype, Device::cuda());
    const Tensor w = testing::random_tensor({2048, 2048}, 12, -1, 1, dtype, Device::cuda());
    const auto products = [&] {
      return std::vector<Tensor>{matmul(a, expand(w, {4, 2048, 2048})), matmul(a, transpose(w, 0, 1)),
                                 matmul(a, expand(w, {4, 2048, 2048}))};
    };
    std::vector<Tensor> own;
    {
      const config::ScopedSetting off(config::Knob::gemm_search, "0");
      own = products();
    }
    const int64_t searches = cuda::gemm_searches();
    const std::vector<Tensor> searched = products();
    EXPECT_GT(cuda::gemm_searches(), searches) << "the products' shapes were not searched";
    const double atol = dtype == DType::f32 ? 2e-3 : 1.0, rtol = dtype == DType::f32 ? 1e-4 : 3e-2;
    for (size_t i = 0; i < own.size(); ++i) {
      EXPECT_TRUE(testing::all_close(searched[i].to(Device::cpu(), DType::f64),
                                     own[i].to(Device::cpu(), DType::f64), atol, rtol))
          << dtype_name(dtype) << " product " << i;
    }
  }
#endif
}

TEST(MatmulCuda, AutocastRunsInHalf) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a =
      testing::random_tensor({2, 8, 16}, 8, -1, 1, DType::f32, Device::cuda()).set_requires_grad(true);
  const Tensor b = testing::random_tensor({16, 4}, 9, -1, 1, DType::f32, Device::cuda());
  Tensor y;
  {
    AutocastGuard guard(DType::bf16);
    y = matmul(a, b);
    EXPECT_EQ(bmm(a, a.permute({0, 2, 1})).dtype(), DType::bf16);
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(matmul(a, b).dtype(), DType::f32);  // autocast off again
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f64), matmul(a, b).to(Device::cpu(), DType::f64),
                                 5e-2, 3e-2));
  y.backward(Tensor::ones(y.shape(), DType::bf16, Device::cuda()));
  EXPECT_EQ(a.grad().dtype(), DType::f32);  // the gradient reaches the f32 leaf through the cast
}

TEST(MatmulCuda, RejectsMixedDevices) {
  LIFTOFF_REQUIRE_CUDA();
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}, DType::f32, Device::cuda()), Tensor::zeros({3, 4})), DeviceError);
}

}  // namespace
}  // namespace liftoff
