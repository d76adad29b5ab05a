#include <gtest/gtest.h>

#include "ops/attention/attention.h"
#include "ops/views/views.h"
#include "runtime/autocast.h"
#include "runtime/graph.h"
#include "tests/common/cuda_test.h"
#include "tests/common/graph_capture.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Tolerance {
  DType dtype;
  double atol, rtol;
};
// Scores, weights and gradients are rounded to the dtype between the GEMMs and the f32 row kernel.
const std::vector<Tolerance> kDtypes = {{DType::f32, 1e-5, 1e-4},
                                        {DType::f64, 1e-12, 1e-12},
                                        {DType::f16, 2e-2, 2e-2},
                                        {DType::bf16, 8e-2, 5e-2}};

::testing::AssertionResult parity(const testing::TensorFn& fn, const std::vector<Tensor>& inputs,
                                  const Tolerance& t) {
  testing::ParityOptions options;
  options.atol = t.atol;
  options.rtol = t.rtol;
  options.cuda_dtype = t.dtype;
  return testing::cuda_parity(fn, inputs, options);
}

std::vector<Tensor> qkv(const Shape& q, const Shape& k, const Shape& v, uint64_t seed) {
  return {testing::random_tensor(q, seed).set_requires_grad(true),
          testing::random_tensor(k, seed + 1).set_requires_grad(true),
          testing::random_tensor(v, seed + 2).set_requires_grad(true)};
}

TEST(AttentionCuda, PlainAndCausalMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  // S = 70: not a multiple of the warp; L != S, Ev != E.
  const std::vector<Tensor> in = qkv({2, 3, 5, 32}, {2, 3, 70, 32}, {2, 3, 70, 16}, 1);
  for (const Tolerance& t : kDtypes) {
    EXPECT_TRUE(parity(
        [](const std::vector<Tensor>& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }, in, t))
        << dtype_name(t.dtype);
    EXPECT_TRUE(parity(
        [](const std::vector<Tensor>& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true, 0.3);
        },
        in, t))
        << dtype_name(t.dtype) << " causal";
  }
}

TEST(AttentionCuda, MasksAndBroadcastMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  // k/v shared by the heads; a float padding bias [B, 1, 1, S] with a gradient; a bool [L, S] mask.
  std::vector<Tensor> in = qkv({2, 4, 9, 16}, {2, 1, 40, 16}, {2, 1, 40, 8}, 11);
  in.push_back(testing::random_tensor({2, 1, 1, 40}, 14, -2, 2).set_requires_grad(true));
  std::vector<uint8_t> keep(9 * 40);
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 7 + i / 40) % 3 != 0;
  for (size_t j = 0; j < 40; ++j) keep[4 * 40 + j] = 0;  // row 4 attends nothing: zeros
  const Tensor mask = Tensor::from_vector<uint8_t>(keep, {9, 40});
  for (const Tolerance& t : kDtypes) {
    EXPECT_TRUE(parity(
        [](const std::vector<Tensor>& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); }, in,
        t))
        << dtype_name(t.dtype) << " float mask";
    EXPECT_TRUE(parity(
        [mask](const std::vector<Tensor>& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], mask.to(x[0].device()));
        },
        {in[0], in[1], in[2]}, t))
        << dtype_name(t.dtype) << " bool mask";
  }
}

TEST(AttentionCuda, DropoutMaskMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Tensor> in = qkv({2, 6, 16}, {2, 50, 16}, {2, 50, 8}, 21);
  const auto fn = [](const std::vector<Tensor>& x) {
    Generator gen(99);  // same seed and offset on both devices: the same Philox mask
    return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.25, false, std::nullopt, &gen);
  };
  EXPECT_TRUE(parity(fn, in, kDtypes[0]));
  EXPECT_TRUE(parity(fn, in, kDtypes[1]));
}

TEST(AttentionCuda, AutocastRunsInHalf) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor q =
      testing::random_tensor({2, 5, 8}, 31, -1, 1, DType::f32, Device::cuda()).set_requires_grad(true);
  const Tensor k = testing::random_tensor({2, 7, 8}, 32, -1, 1, DType::f32, Device::cuda());
  const Tensor v = testing::random_tensor({2, 7, 8}, 33, -1, 1, DType::f32, Device::cuda());
  const Tensor bias = testing::random_tensor({5, 7}, 34, -1, 1, DType::f32, Device::cuda());
  Tensor y;
  {
    AutocastGuard guard(DType::f16);
    y = scaled_dot_product_attention(q, k, v, bias);
  }
  EXPECT_EQ(y.dtype(), DType::f16);
  const Tensor ref = scaled_dot_product_attention(q, k, v, bias);
  EXPECT_TRUE(
      testing::all_close(y.to(Device::cpu(), DType::f64), ref.to(Device::cpu(), DType::f64), 1e-2, 1e-2));
  y.backward(Tensor::ones(y.shape(), DType::f16, Device::cuda()));
  EXPECT_EQ(q.grad().dtype(), DType::f32);
}

TEST(AttentionCuda, CapturesInACudaGraph) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor q =
      testing::random_tensor({2, 2, 8, 16}, 41, -1, 1, DType::f32, Device::cuda()).set_requires_grad(true);
  const Tensor k = testing::random_tensor({2, 2, 12, 16}, 42, -1, 1, DType::f32, Device::cuda());
  const Tensor v = testing::random_tensor({2, 2, 12, 16}, 43, -1, 1, DType::f32, Device::cuda());
  const auto step = [&] {
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
    out.backward(Tensor::ones(out.shape(), DType::f32, Device::cuda()));
    return out;
  };
  const Tensor eager = step().to(Device::cpu());
  const Tensor eager_grad = q.grad().to(Device::cpu());
  q.set_grad(Tensor());
  CudaGraph graph(Device::cuda());
  const Tensor captured = testing::capture_into(graph, step);
  graph.replay();
  EXPECT_TRUE(testing::all_close(captured.to(Device::cpu()), eager, 0, 0));
  EXPECT_TRUE(testing::all_close(q.grad().to(Device::cpu()), eager_grad, 0, 0));
}

// The heads of one projection (read through device-built matrix addresses, the output and gradient written
// in the projection's order) replay bit for bit what the eager step computed.
TEST(AttentionCuda, HeadsOfOneProjectionCaptureInACudaGraph) {
  LIFTOFF_REQUIRE_CUDA();
  const int64_t heads = 2, d = 16, e = heads * d;
  const Tensor proj =
      testing::random_tensor({2, 12, 3 * e}, 44, -1, 1, DType::f32, Device::cuda()).set_requires_grad(true);
  const auto heads_of = [&](int64_t i) {
    return transpose(unflatten(slice(proj, 2, i * e, (i + 1) * e), 2, {heads, d}), 1, 2);
  };
  const auto step = [&] {
    const Tensor out = scaled_dot_product_attention(heads_of(0), heads_of(1), heads_of(2));
    out.backward(Tensor::ones(out.shape(), DType::f32, Device::cuda()));
    return out;
  };
  const Tensor eager = step().to(Device::cpu());
  const Tensor eager_grad = proj.grad().to(Device::cpu());
  proj.set_grad(Tensor());
  CudaGraph graph(Device::cuda());
  const Tensor captured = testing::capture_into(graph, step);
  graph.replay();
  EXPECT_TRUE(testing::all_close(captured.to(Device::cpu()), eager, 0, 0));
  EXPECT_TRUE(testing::all_close(proj.grad().to(Device::cpu()), eager_grad, 0, 0));
}

}  // namespace
}  // namespace liftoff
