#include "ops/attention/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/dropout/dropout.h"
#include "ops/matmul/batched.h"
#include "ops/ops.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// softmax(q k^T * scale + bias) per batch entry, in f64 loops; q [B, L, E], k [B, S, E], bias [B, L, S] (-inf
// = masked) or empty. Returns the weights [B, L, S]; a row with every key masked is all zero.
std::vector<double> naive_weights(const Tensor& q, const Tensor& k, const std::vector<double>& bias,
                                  double scale) {
  const int64_t nb = q.size(0), l = q.size(1), e = q.size(2), s = k.size(1);
  const std::vector<double> qv = q.contiguous().to_vector<double>(), kv = k.contiguous().to_vector<double>();
  std::vector<double> w(static_cast<size_t>(nb * l * s));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t i = 0; i < l; ++i) {
      double* row = &w[static_cast<size_t>((b * l + i) * s)];
      double m = -kInf;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t p = 0; p < e; ++p) dot += qv[(b * l + i) * e + p] * kv[(b * s + j) * e + p];
        row[j] = dot * scale + (bias.empty() ? 0.0 : bias[static_cast<size_t>((b * l + i) * s + j)]);
        m = std::max(m, row[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < s; ++j) sum += (row[j] = m == -kInf ? 0.0 : std::exp(row[j] - m));
      for (int64_t j = 0; j < s; ++j) row[j] = sum > 0 ? row[j] / sum : 0.0;
    }
  }
  return w;
}

// weights [B, L, S] @ v [B, S, Ev].
Tensor naive_apply(const std::vector<double>& w, const Tensor& v, int64_t l) {
  const int64_t nb = v.size(0), s = v.size(1), ev = v.size(2);
  const std::vector<double> vv = v.contiguous().to_vector<double>();
  std::vector<double> out(static_cast<size_t>(nb * l * ev), 0.0);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < l; ++i)
      for (int64_t j = 0; j < s; ++j)
        for (int64_t c = 0; c < ev; ++c)
          out[static_cast<size_t>((b * l + i) * ev + c)] +=
              w[static_cast<size_t>((b * l + i) * s + j)] * vv[static_cast<size_t>((b * s + j) * ev + c)];
  return Tensor::from_vector<double>(out, {nb, l, ev});
}

struct Qkv {
  Tensor q, k, v;
};
Qkv random_qkv(int64_t b, int64_t l, int64_t s, int64_t e, int64_t ev, uint64_t seed) {
  return {testing::random_tensor({b, l, e}, seed), testing::random_tensor({b, s, e}, seed + 1),
          testing::random_tensor({b, s, ev}, seed + 2)};
}

TEST(Attention, MatchesNaiveFormula) {
  const Qkv t = random_qkv(2, 3, 5, 4, 6, 1);  // L != S, Ev != E
  const Tensor out = scaled_dot_product_attention(t.q, t.k, t.v);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 6}));
  const Tensor expected = naive_apply(naive_weights(t.q, t.k, {}, 0.5), t.v, 3);
  EXPECT_TRUE(testing::all_close(out, expected, 1e-12, 1e-12));
  // Custom scale.
  const Tensor scaled = scaled_dot_product_attention(t.q, t.k, t.v, Tensor(), 0.0, false, 1.7);
  EXPECT_TRUE(
      testing::all_close(scaled, naive_apply(naive_weights(t.q, t.k, {}, 1.7), t.v, 3), 1e-12, 1e-12));
  // f32 on the same path.
  const Tensor f = scaled_dot_product_attention(t.q.to(DType::f32), t.k.to(DType::f32), t.v.to(DType::f32));
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_TRUE(testing::all_close(f, expected, 1e-5, 1e-5));
}

TEST(Attention, CausalIsTopLeftAligned) {
  const Qkv t = random_qkv(2, 3, 5, 4, 2, 11);
  std::vector<double> bias(2 * 3 * 5, 0.0);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = i + 1; j < 5; ++j) bias[static_cast<size_t>((b * 3 + i) * 5 + j)] = -kInf;
  const Tensor out = scaled_dot_product_attention(t.q, t.k, t.v, Tensor(), 0.0, true);
  EXPECT_TRUE(testing::all_close(out, naive_apply(naive_weights(t.q, t.k, bias, 0.5), t.v, 3), 1e-12, 1e-12));
  // Row 0 attends only key 0: its output is v[b, 0].
  EXPECT_TRUE(testing::all_close(out.select(1, 0), t.v.select(1, 0), 1e-12, 1e-12));
}

TEST(Attention, BoolMaskBroadcastsOverBatch) {
  const Qkv t = random_qkv(2, 3, 4, 2, 3, 21);
  // [L, S] mask, u8: nonzero = attend. Row 2 masks every key: zeros.
  const std::vector<uint8_t> keep = {1, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0};
  const Tensor mask = Tensor::from_vector<uint8_t>(keep, {3, 4});
  std::vector<double> bias;
  for (int b = 0; b < 2; ++b)
    for (uint8_t m : keep) bias.push_back(m ? 0.0 : -kInf);
  const Tensor out = scaled_dot_product_attention(t.q, t.k, t.v, mask);
  EXPECT_TRUE(testing::all_close(out, naive_apply(naive_weights(t.q, t.k, bias, 1 / std::sqrt(2.0)), t.v, 3),
                                 1e-12, 1e-12));
  EXPECT_EQ(out.select(1, 2).to_vector<double>(), std::vector<double>(6, 0.0));
}

TEST(Attention, FloatMaskIsAddedAndBroadcast) {
  // q [2, 2, L, E] (batch, heads), mask [2, 1, 1, S] (a per-sequence padding bias), k/v shared over heads.
  const Tensor q = testing::random_tensor({2, 2, 3, 4}, 31);
  const Tensor k = testing::random_tensor({2, 1, 5, 4}, 32);
  const Tensor v = testing::random_tensor({2, 1, 5, 3}, 33);
  const Tensor mask = testing::random_tensor({2, 1, 1, 5}, 34, -2, 2);
  const Tensor out = scaled_dot_product_attention(q, k, v, mask);
  EXPECT_EQ(out.shape(), (Shape{2, 2, 3, 3}));
  const std::vector<double> mv = mask.to_vector<double>();
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < 2; ++h) {
      const Tensor qb = q.select(0, b).select(0, h).view({1, 3, 4}),
                   kb = k.select(0, b).contiguous().view({1, 5, 4});
      std::vector<double> bias;
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 5; ++j) bias.push_back(mv[static_cast<size_t>(b * 5 + j)]);
      const Tensor expected =
          naive_apply(naive_weights(qb, kb, bias, 0.5), v.select(0, b).contiguous().view({1, 5, 3}), 3);
      EXPECT_TRUE(testing::all_close(out.select(0, b).select(0, h), expected.view({3, 3}), 1e-12, 1e-12))
          << b << "," << h;
    }
  }
}

TEST(Attention, GradcheckQkv) {
  const Tensor q = testing::random_tensor({2, 3, 4}, 41).set_requires_grad(true);
  const Tensor k = testing::random_tensor({2, 5, 4}, 42).set_requires_grad(true);
  const Tensor v = testing::random_tensor({2, 5, 3}, 43).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); },
      {q, k, v}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.0, true, 0.9);
      },
      {q, k, v}));
}

// q, k, v as the heads of one [N, L, 3 * E] projection (MultiheadAttention's split): read where they lie,
// the output written in the projection's [N, L, H, D] order (so joining the heads is a view, as in PyTorch's
// fused attention), each gradient in its input's order; values and gradients as the contiguous inputs give.
TEST(Attention, HeadsOfOneProjectionNeedNoCopies) {
  const int64_t n = 2, l = 5, heads = 3, d = 4, e = heads * d;
  const Tensor proj = testing::random_tensor({n, l, 3 * e}, 44).set_requires_grad(true);
  const Tensor ref = proj.detach().clone().set_requires_grad(true);
  const auto heads_of = [&](const Tensor& p, int64_t i) {
    return transpose(unflatten(slice(p, 2, i * e, (i + 1) * e), 2, {heads, d}), 1, 2);  // [N, H, L, D]
  };
  const int64_t copies = matmul_detail::operand_copies();
  const Tensor out = scaled_dot_product_attention(heads_of(proj, 0), heads_of(proj, 1), heads_of(proj, 2));
  EXPECT_EQ(matmul_detail::operand_copies(), copies) << "forward";
  ASSERT_EQ(out.shape(), (Shape{n, heads, l, d}));
  EXPECT_TRUE(transpose(out, 1, 2).is_contiguous()) << shape_str(out.strides());
  const Tensor expected = scaled_dot_product_attention(
      heads_of(ref, 0).contiguous(), heads_of(ref, 1).contiguous(), heads_of(ref, 2).contiguous());
  EXPECT_TRUE(testing::all_close(out, expected, 1e-12, 1e-12));
  const Tensor weights = testing::random_tensor({n, heads, l, d}, 45);
  sum(mul(out, weights)).backward();
  EXPECT_EQ(matmul_detail::operand_copies(), copies) << "backward";
  sum(mul(expected, weights)).backward();
  EXPECT_TRUE(testing::all_close(proj.grad(), ref.grad(), 1e-12, 1e-12));
}

TEST(Attention, GradcheckMaskAndBroadcast) {
  const Tensor q = testing::random_tensor({2, 2, 3, 4}, 51).set_requires_grad(true);
  const Tensor k = testing::random_tensor({1, 5, 4}, 52).set_requires_grad(true);  // shared by the batch
  const Tensor v = testing::random_tensor({2, 1, 5, 2}, 53).set_requires_grad(true);
  const Tensor mask = testing::random_tensor({3, 5}, 54).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); },
      {q, k, v, mask}));
  // A bool mask (no gradient of its own) with a transposed-view key.
  const Tensor keep = Tensor::from_vector<uint8_t>({1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1}, {3, 5});
  EXPECT_TRUE(testing::gradcheck(
      [keep](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1].permute({0, 2, 1}).contiguous().permute({0, 2, 1}),
                                            in[2], keep);
      },
      {q, k, v}));
}

// v = identity makes the output the dropped weights themselves.
TEST(Attention, DropoutStatisticsAndDeterminism) {
  const int64_t l = 64, s = 64;
  const Tensor q = testing::random_tensor({2, l, 8}, 61), k = testing::random_tensor({2, s, 8}, 62);
  std::vector<double> eye(static_cast<size_t>(s * s), 0.0);
  for (int64_t j = 0; j < s; ++j) eye[static_cast<size_t>(j * s + j)] = 1.0;
  const Tensor v = Tensor::from_vector<double>(eye, {1, s, s});
  const double p = 0.3;
  Generator gen(123);
  const Tensor dropped = scaled_dot_product_attention(q, k, v, Tensor(), p, false, std::nullopt, &gen);
  const std::vector<double> weights = naive_weights(q, k, {}, 1 / std::sqrt(8.0));
  const std::vector<double> d = dropped.to_vector<double>();
  int64_t zeros = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] == 0.0) {
      ++zeros;
    } else {
      EXPECT_NEAR(d[i], weights[i] / (1 - p), 1e-12) << i;
    }
  }
  const double fraction = static_cast<double>(zeros) / static_cast<double>(d.size());
  EXPECT_NEAR(fraction, p, 0.02);  // 8192 draws: 5 standard deviations
  // The mask is ops/dropout's: the same generator state drops the same weights.
  Generator again(123);
  const Tensor reference = dropout(Tensor::from_vector<double>(weights, {2, l, s}), p, true, again);
  EXPECT_TRUE(testing::all_close(dropped, reference, 1e-12, 1e-12));
  // Reproducible from the seed; a new draw (advanced offset) or another seed differs.
  Generator same(123);
  EXPECT_EQ(
      scaled_dot_product_attention(q, k, v, Tensor(), p, false, std::nullopt, &same).to_vector<double>(), d);
  EXPECT_NE(
      scaled_dot_product_attention(q, k, v, Tensor(), p, false, std::nullopt, &same).to_vector<double>(), d);
  Generator other(124);
  EXPECT_NE(
      scaled_dot_product_attention(q, k, v, Tensor(), p, false, std::nullopt, &other).to_vector<double>(), d);
}

TEST(Attention, GradcheckWithDropout) {
  const Tensor q = testing::random_tensor({2, 3, 4}, 71).set_requires_grad(true);
  const Tensor k = testing::random_tensor({2, 4, 4}, 72).set_requires_grad(true);
  const Tensor v = testing::random_tensor({2, 4, 3}, 73).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        Generator gen(5);  // the same mask at every evaluation
        return scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.4, false, std::nullopt, &gen);
      },
      {q, k, v}));
}

TEST(Attention, ErrorsNameShapes) {
  const Tensor q = Tensor::zeros({2, 3, 4}), k = Tensor::zeros({2, 5, 4}), v = Tensor::zeros({2, 5, 6});
  try {
    scaled_dot_product_attention(q, Tensor::zeros({2, 5, 3}), v);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(
        std::string(e.what()).find("key's last dim 3 differs from query's embedding size 4 (query [2, 3, 4], "
                                   "key [2, 5, 3], value [2, 5, 6])"),
        std::string::npos)
        << e.what();
  }
  try {
    scaled_dot_product_attention(q, k, v, Tensor::zeros({4, 5}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(
        std::string(e.what()).find("attn_mask [4, 5] does not broadcast to the attention weights [2, 3, 5]"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(scaled_dot_product_attention(q, k, Tensor::zeros({2, 4, 6})), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(q, Tensor::zeros({3, 5, 4}), v), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(Tensor::zeros({4}), k, v), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 5}), 0.0, true), ValueError);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, Tensor(), 0.1), ValueError);  // no generator
  Generator gen(1);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, Tensor(), 1.5, false, std::nullopt, &gen), ValueError);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v.to(DType::f64)), DTypeError);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 5}, DType::i32)), DTypeError);
}

}  // namespace
}  // namespace liftoff
