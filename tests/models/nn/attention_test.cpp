// MultiheadAttention against a reference composed by hand on the host (loops over the formula of
// torch.nn.MultiheadAttention), and TransformerEncoderLayer against its composition from public ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/layers.h"
#include "ops/ops.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

using testing::random_tensor;

std::vector<std::string> parameter_names(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, t] : m.named_parameters()) names.push_back(name);
  return names;
}

Tensor parameter(const Module& m, const std::string& name) {
  for (const auto& [n, t] : m.named_parameters())
    if (n == name) return t;
  throw ValueError("no parameter " + name);
}

// rows [T, in] @ w[out, in]^T + b[out] on the host, w holding `out` rows starting at row `first`.
std::vector<double> project(const std::vector<double>& x, int64_t rows, int64_t in,
                            const std::vector<double>& w, const std::vector<double>& b, int64_t first,
                            int64_t out) {
  std::vector<double> y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[first + o];
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[(first + o) * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

// torch.nn.MultiheadAttention(E, H, batch_first=True)(q, k, v, attn_mask=mask)[0] on the host, in f64.
// mask: [L, S] additive, or empty; causal adds -inf above the diagonal.
std::vector<double> reference_mha(const MultiheadAttention& mha, const Tensor& q, const Tensor& k,
                                  const Tensor& v, int64_t heads, const std::vector<double>& mask,
                                  bool causal) {
  const int64_t n = q.size(0), l = q.size(1), s = k.size(1), e = q.size(2), hd = e / heads;
  const std::vector<double> w = mha.in_proj_weight().to_vector<double>();
  const std::vector<double> b = mha.in_proj_bias().to_vector<double>();
  const std::vector<double> wo = mha.out_proj().weight().to_vector<double>();
  const std::vector<double> bo = mha.out_proj().bias().to_vector<double>();
  const std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(),
                            vv = v.to_vector<double>();
  std::vector<double> out;
  for (int64_t bi = 0; bi < n; ++bi) {
    auto rows = [&](const std::vector<double>& t, int64_t len) {
      return std::vector<double>(t.begin() + bi * len * e, t.begin() + (bi + 1) * len * e);
    };
    const std::vector<double> Q = project(rows(qv, l), l, e, w, b, 0, e);
    const std::vector<double> K = project(rows(kv, s), s, e, w, b, e, e);
    const std::vector<double> V = project(rows(vv, s), s, e, w, b, 2 * e, e);
    std::vector<double> o(l * e, 0.0);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < l; ++i) {
        std::vector<double> p(s);
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += Q[i * e + h * hd + d] * K[j * e + h * hd + d];
          p[j] = dot / std::sqrt(static_cast<double>(hd)) + (mask.empty() ? 0.0 : mask[i * s + j]);
          if (causal && j > i) p[j] = -std::numeric_limits<double>::infinity();
          top = std::max(top, p[j]);
        }
        double total = 0;
        for (double& pj : p) total += (pj = std::exp(pj - top));
        for (int64_t j = 0; j < s; ++j)
          for (int64_t d = 0; d < hd; ++d) o[i * e + h * hd + d] += p[j] / total * V[j * e + h * hd + d];
      }
    const std::vector<double> y = project(o, l, e, wo, bo, 0, e);
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

// A MultiheadAttention in f64 with random (nonzero) biases, so every term of the formula shows.
std::unique_ptr<MultiheadAttention> make_mha(int64_t e, int64_t heads, uint64_t seed) {
  Generator gen(seed);
  auto mha = std::make_unique<MultiheadAttention>(e, heads, gen);
  mha->to(DType::f64);
  mha->in_proj_bias().copy_(random_tensor({3 * e}, seed + 1));
  mha->out_proj().bias().copy_(random_tensor({e}, seed + 2));
  return mha;
}

void expect_matches(const Tensor& actual, const std::vector<double>& expected) {
  const std::vector<double> a = actual.to_vector<double>();
  ASSERT_EQ(a.size(), expected.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], expected[i], 1e-12) << "element " << i;
}

TEST(MultiheadAttention, ParametersAsPyTorch) {
  Generator gen(1);
  MultiheadAttention mha(8, 2, gen);
  EXPECT_EQ(parameter_names(mha),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(mha.in_proj_weight().shape(), (Shape{24, 8}));
  EXPECT_EQ(mha.in_proj_bias().to_vector<float>(), std::vector<float>(24, 0.0f));
  EXPECT_EQ(mha.out_proj().bias().to_vector<float>(), std::vector<float>(8, 0.0f));
  const std::vector<float> w = mha.in_proj_weight().to_vector<float>();
  const double bound = std::sqrt(6.0 / 32.0);  // xavier_uniform: fan_in + fan_out = 8 + 24
  for (const float x : w) EXPECT_LE(std::abs(x), bound);
  EXPECT_GT(*std::max_element(w.begin(), w.end()), 0.8 * bound);
  EXPECT_EQ(MultiheadAttention(8, 2, gen, 0.0, false).named_parameters().size(), 2u);
  EXPECT_THROW(MultiheadAttention(8, 3, gen), ValueError);
}

TEST(MultiheadAttention, SelfAttentionMatchesTheHandComposedReference) {
  const auto mha = make_mha(6, 2, 3);
  const Tensor x = random_tensor({2, 3, 6}, 4);
  expect_matches(mha->forward(x), reference_mha(*mha, x, x, x, 2, {}, false));
  expect_matches(mha->forward(x, x, x, Tensor(), true), reference_mha(*mha, x, x, x, 2, {}, true));
}

TEST(MultiheadAttention, CrossAttentionWithMasksMatchesTheReference) {
  const auto mha = make_mha(6, 3, 5);
  const Tensor q = random_tensor({2, 3, 6}, 6), k = random_tensor({2, 4, 6}, 7),
               v = random_tensor({2, 4, 6}, 8);
  const Tensor mask = random_tensor({3, 4}, 9, -2, 1);
  expect_matches(mha->forward(q, k, v), reference_mha(*mha, q, k, v, 3, {}, false));
  expect_matches(mha->forward(q, k, v, mask),
                 reference_mha(*mha, q, k, v, 3, mask.to_vector<double>(), false));
  // [N*H, L, S]: the same [L, S] mask repeated for every (batch, head).
  expect_matches(mha->forward(q, k, v, repeat(unsqueeze(mask, 0), {6, 1, 1})),
                 reference_mha(*mha, q, k, v, 3, mask.to_vector<double>(), false));
}

TEST(MultiheadAttention, Gradcheck) {
  const auto mha = make_mha(4, 2, 10);
  const Tensor x = random_tensor({2, 3, 4}, 11).set_requires_grad(true);
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : mha->parameters()) inputs.push_back(p);
  EXPECT_TRUE(testing::gradcheck([&](const std::vector<Tensor>& in) { return mha->forward(in[0]); }, inputs));
  const Tensor k = random_tensor({2, 5, 4}, 12).set_requires_grad(true);
  const Tensor v = random_tensor({2, 5, 4}, 13).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& in) { return mha->forward(in[0], in[1], in[2], Tensor(), false); },
      {x, k, v, mha->in_proj_weight()}));
}

TEST(MultiheadAttention, BadInputsNameTheShapes) {
  const auto mha = make_mha(6, 2, 14);
  const Tensor q = random_tensor({2, 3, 6}, 15);
  try {
    mha->forward(q, random_tensor({2, 4, 5}, 16), random_tensor({2, 4, 6}, 17));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[2, 4, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 3, 6]"), std::string::npos) << msg;
  }
  EXPECT_THROW(mha->forward(q, q, q, random_tensor({3, 4}, 18)), ShapeError);
  EXPECT_THROW(mha->forward(q, q, q, Tensor::ones({3, 3}, DType::u8)), DTypeError);
  EXPECT_THROW(mha->forward(random_tensor({3, 6}, 19)), ShapeError);
}

TEST(TransformerEncoderLayer, ParametersAsPyTorch) {
  Generator gen(20);
  TransformerEncoderLayer layer(8, 2, gen, 16);
  EXPECT_EQ(parameter_names(layer),
            (std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                      "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                      "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                                      "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}));
  EXPECT_EQ(parameter(layer, "linear1.weight").shape(), (Shape{16, 8}));
  EXPECT_THROW(TransformerEncoderLayer(8, 2, gen, 16, 0.1, "swish"), ValueError);
}

// Both orders against their composition from the layer's own parameters and public ops.
TEST(TransformerEncoderLayer, MatchesItsComposition) {
  for (const bool norm_first : {true, false}) {
    Generator gen(21);
    TransformerEncoderLayer layer(6, 2, gen, 12, 0.0, "gelu", 1e-5, norm_first);
    layer.to(DType::f64);
    uint64_t seed = 100;
    for (const Tensor& p : layer.parameters())
      p.copy_(random_tensor(p.shape(), ++seed, -0.5, 0.5));  // non-trivial norms and biases
    const Tensor x = random_tensor({2, 4, 6}, 22);
    auto norm = [&](const Tensor& t, const std::string& which) {
      return layer_norm(t, {6}, parameter(layer, which + ".weight"), parameter(layer, which + ".bias"));
    };
    auto ff = [&](const Tensor& t) {
      const Tensor h = gelu(linear(t, parameter(layer, "linear1.weight"), parameter(layer, "linear1.bias")));
      return linear(h, parameter(layer, "linear2.weight"), parameter(layer, "linear2.bias"));
    };
    Tensor expected;
    if (norm_first) {
      const Tensor y = add(x, layer.self_attn().forward(norm(x, "norm1")));
      expected = add(y, ff(norm(y, "norm2")));
    } else {
      const Tensor y = norm(add(x, layer.self_attn().forward(x)), "norm1");
      expected = norm(add(y, ff(y)), "norm2");
    }
    EXPECT_TRUE(testing::all_close(layer.forward(x), expected, 1e-12, 1e-12)) << "norm_first " << norm_first;
  }
}

TEST(TransformerEncoderLayer, GradcheckAndDropoutOnlyInTraining) {
  Generator gen(23);
  TransformerEncoderLayer layer(4, 2, gen, 8, 0.0, "relu", 1e-5, true);
  layer.to(DType::f64);
  const Tensor x = random_tensor({1, 3, 4}, 24).set_requires_grad(true);
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : layer.parameters()) inputs.push_back(p);
  EXPECT_TRUE(
      testing::gradcheck([&](const std::vector<Tensor>& in) { return layer.forward(in[0]); }, inputs));

  TransformerEncoderLayer dropping(4, 2, gen, 8, 0.5);
  const Tensor xf = random_tensor({2, 3, 4}, 25, -1, 1, DType::f32);
  dropping.eval();
  const Tensor a = dropping.forward(xf);
  EXPECT_TRUE(testing::all_close(dropping.forward(xf), a, 0, 0));  // eval: deterministic
  dropping.train();
  EXPECT_FALSE(testing::all_close(dropping.forward(xf), a, 1e-3, 0));  // training: dropped
}

}  // namespace
}  // namespace liftoff
