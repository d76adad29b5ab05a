#include "ops/matmul/matmul.h"

#include <gtest/gtest.h>

#include "ops/linear/linear.h"
#include "ops/matmul/batched.h"
#include "ops/scale/scale.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// torch.matmul by definition, in f64 loops: 1-D promotion, broadcast batch dims, then the added dims removed.
Tensor naive_matmul(const Tensor& a_in, const Tensor& b_in) {
  Shape as = a_in.shape(), bs = b_in.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const std::vector<double> a = a_in.to(DType::f64).contiguous().to_vector<double>();
  const std::vector<double> b = b_in.to(DType::f64).contiguous().to_vector<double>();
  const size_t nb = std::max(as.size(), bs.size()) - 2;
  Shape batch(nb);
  auto dim_of = [nb](const Shape& s, size_t d) {
    return d + s.size() - 2 < nb ? 1 : s[d + s.size() - 2 - nb];
  };
  for (size_t d = 0; d < nb; ++d) batch[d] = std::max(dim_of(as, d), dim_of(bs, d));
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  // Offset of batch entry `idx` (row-major over batch) in an operand of shape s, broadcasting its size-1
  // dims.
  auto offset = [&](const Shape& s, int64_t idx) {
    int64_t off = 0, stride = s[s.size() - 2] * s.back();
    for (size_t d = nb; d-- > 0;) {
      const int64_t i = idx % batch[d];
      idx /= batch[d];
      const int64_t size = dim_of(s, d);
      if (size != 1) off += i * stride;
      stride *= size;
    }
    return off;
  };
  std::vector<double> c;
  for (int64_t bi = 0; bi < shape_numel(batch); ++bi) {
    const int64_t oa = offset(as, bi), ob = offset(bs, bi);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += a[oa + i * k + p] * b[ob + p * n + j];
        c.push_back(acc);
      }
    }
  }
  Shape out = batch;
  if (a_in.dim() >= 2) out.push_back(m);
  if (b_in.dim() >= 2) out.push_back(n);
  return Tensor::from_vector<double>(c, out);
}

// Stored with its last two dims swapped, then viewed back: same values, transposed strides.
Tensor transposed_view(const Tensor& t) {
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::swap(order[order.size() - 1], order[order.size() - 2]);
  return t.permute(order).contiguous().permute(order);
}

struct ShapeCase {
  Shape a, b;
};
const std::vector<ShapeCase> kShapes = {
    {{4}, {4}},          {{3, 4}, {4}},       {{4}, {4, 5}},          {{3, 4}, {4, 5}},
    {{2, 3, 4}, {4, 5}}, {{3, 4}, {2, 4, 5}}, {{2, 3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 2}},
    {{4}, {2, 4, 5}},    {{2, 3, 4}, {4}},    {{1, 3, 4}, {2, 4, 5}}, {{2, 2, 1, 3, 4}, {1, 2, 4, 1}},
    {{3, 0}, {0, 2}},
};

TEST(Matmul, ShapesMatchNaiveLoops) {
  uint64_t seed = 1;
  for (const ShapeCase& c : kShapes) {
    const Tensor a = testing::random_tensor(c.a, seed++);
    const Tensor b = testing::random_tensor(c.b, seed++);
    const Tensor expected = naive_matmul(a, b);
    const Tensor y = matmul(a, b);
    EXPECT_EQ(y.shape(), expected.shape()) << shape_str(c.a) << " @ " << shape_str(c.b);
    EXPECT_TRUE(testing::all_close(y, expected, 1e-12, 1e-12)) << shape_str(c.a) << " @ " << shape_str(c.b);
    const Tensor yf = matmul(a.to(DType::f32), b.to(DType::f32));
    EXPECT_EQ(yf.dtype(), DType::f32);
    EXPECT_TRUE(testing::all_close(yf, expected, 1e-5, 1e-5)) << shape_str(c.a) << " @ " << shape_str(c.b);
  }
}

TEST(Matmul, EmptyOperands) {
  EXPECT_EQ(matmul(Tensor::zeros({0, 3, 4}), Tensor::zeros({4, 2})).shape(), (Shape{0, 3, 2}));
  EXPECT_EQ(matmul(Tensor::zeros({2, 0, 4}), Tensor::zeros({2, 4, 2})).shape(), (Shape{2, 0, 2}));
  // K = 0: an empty sum is 0.
  EXPECT_EQ(matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 2})).to_vector<float>(),
            std::vector<float>(4, 0.0f));
}

TEST(Matmul, Forward2d) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  const Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  // [1 2 3; 4 5 6] @ [7 8; 9 10; 11 12]
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
  const Tensor dot =
      matmul(Tensor::from_vector<double>({1, 2, 3}, {3}), Tensor::from_vector<double>({4, 5, 6}, {3}));
  EXPECT_EQ(dot.shape(), Shape{});
  EXPECT_EQ(dot.item(), 32.0);
}

TEST(Matmul, StridedAndTransposedViews) {
  const Tensor a = testing::random_tensor({2, 3, 4}, 11), b = testing::random_tensor({2, 4, 5}, 12);
  const Tensor expected = naive_matmul(a, b);
  // Transposed storage (read by the GEMM as a transpose), permuted batch dims, and row slices.
  EXPECT_TRUE(testing::all_close(matmul(transposed_view(a), transposed_view(b)), expected, 1e-12, 1e-12));
  const Tensor a_perm = a.permute({1, 0, 2}).contiguous().permute({1, 0, 2});  // batch stride 4, row stride 8
  EXPECT_TRUE(testing::all_close(matmul(a_perm, b), expected, 1e-12, 1e-12));
  const Tensor wide = testing::random_tensor({2, 3, 9}, 13);
  const Tensor a_sliced = wide.slice(2, 2, 6);  // row stride 9
  EXPECT_TRUE(testing::all_close(matmul(a_sliced, b), naive_matmul(a_sliced, b), 1e-12, 1e-12));
  const Tensor every_other = testing::random_tensor({3, 8}, 14).slice(1, 0, 8).permute({1, 0});  // [8, 3]
  const Tensor c = testing::random_tensor({3, 2}, 15);
  EXPECT_TRUE(testing::all_close(matmul(every_other, c), naive_matmul(every_other, c), 1e-12, 1e-12));
}

// The heads of a [N, L, H, D] projection viewed as [N, H, L, D] (attention's q, k, v): batch entries not one
// stride apart are read where they lie (no operand copy), in f32 (the AVX-512 kernel where the host has it)
// and f64 (Eigen); a result view in the same order is written in place. More batch dims than a GEMM call
// spells out are still copied, and still right.
TEST(Matmul, PermutedBatchDimsAreReadAndWrittenInPlace) {
  for (const DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = testing::random_tensor({2, 5, 3, 4}, 21).to(dtype);  // [N, L, H, D]
    const Tensor y = testing::random_tensor({2, 6, 3, 4}, 22).to(dtype);  // [N, S, H, D]
    const Tensor q = x.permute({0, 2, 1, 3}), k = y.permute({0, 2, 1, 3});
    const Tensor expected = naive_matmul(q.contiguous(), k.permute({0, 1, 3, 2}).contiguous());
    const int64_t copies = matmul_detail::operand_copies();
    const Tensor scores = matmul_detail::batched_matmul(q, matmul_detail::transpose_last2(k));
    EXPECT_EQ(matmul_detail::operand_copies(), copies) << dtype_name(dtype);
    EXPECT_TRUE(testing::all_close(scores, expected, 1e-5, 1e-5)) << dtype_name(dtype);
    // scores [N, H, L, S] @ v [N, H, S, D] into a result laid out as [N, L, H, D].
    const Tensor out = matmul_detail::empty_in_order_of({2, 3, 5, 4}, q, dtype, Device::cpu());
    EXPECT_TRUE(out.permute({0, 2, 1, 3}).is_contiguous()) << "the heads join as a view";
    matmul_detail::batched_matmul_into(scores, k, out, 0.5);
    EXPECT_EQ(matmul_detail::operand_copies(), copies) << dtype_name(dtype);
    EXPECT_TRUE(testing::all_close(out, scale(naive_matmul(expected, k.contiguous()), 0.5), 1e-5, 1e-5))
        << dtype_name(dtype);
    // A broadcast operand (stride 0 over N) beside a permuted one.
    const Tensor w = testing::random_tensor({3, 4, 2}, 23).to(dtype);
    EXPECT_TRUE(testing::all_close(matmul(q, w), naive_matmul(q.contiguous(), w), 1e-5, 1e-5));
    EXPECT_EQ(matmul_detail::operand_copies(), copies) << dtype_name(dtype);
  }
  // Five batch dims that do not nest: copied to one stride first.
  const Tensor wide = testing::random_tensor({2, 3, 2, 3, 2, 3, 4}, 24);
  const Tensor scattered = wide.permute({4, 3, 2, 1, 0, 5, 6});
  const Tensor b = testing::random_tensor({4, 2}, 25);
  const int64_t copies = matmul_detail::operand_copies();
  EXPECT_TRUE(testing::all_close(matmul_detail::batched_matmul(scattered, b),
                                 naive_matmul(scattered.contiguous(), b), 1e-12, 1e-12));
  EXPECT_GT(matmul_detail::operand_copies(), copies);
}

// f32 on the CPU takes the AVX-512 kernel where the host has it (ops/matmul/cpu.cpp: transposed B packed per
// call, transposed A per block of rows, alpha applied after) and Eigen elsewhere: every operand layout, sizes
// off the kernel's 16 / 32 / 48-column and 8-row blocks, a broadcast (stride-0) B, the few-rows column split,
// and alpha, against f64 loops.
TEST(Matmul, F32EveryLayoutAndBlockEdge) {
  struct Size {
    int64_t m, n, k;
  };
  uint64_t seed = 100;
  for (const Size z :
       {Size{37, 53, 29}, Size{5, 100, 7}, Size{64, 48, 16}, Size{1, 200, 33}, Size{9, 17, 1}}) {
    const Tensor a = testing::random_tensor({3, z.m, z.k}, seed++).to(DType::f32);
    const Tensor b = testing::random_tensor({3, z.k, z.n}, seed++).to(DType::f32);
    const Tensor b2 = testing::random_tensor({z.k, z.n}, seed++).to(DType::f32);  // broadcast over the batch
    const std::string what = str_cat("m ", z.m, " n ", z.n, " k ", z.k);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Tensor av = ta ? transposed_view(a) : a, bv = tb ? transposed_view(b) : b;
        const Tensor b2v = tb ? transposed_view(b2) : b2;
        const std::string layout = str_cat(what, ta ? " A^T" : " A", tb ? " B^T" : " B");
        EXPECT_TRUE(testing::all_close(matmul(av, bv), naive_matmul(a, b), 1e-5, 1e-5)) << layout;
        EXPECT_TRUE(testing::all_close(matmul(av, b2v), naive_matmul(a, b2), 1e-5, 1e-5))
            << layout << " bcast";
        const Tensor scaled = matmul_detail::batched_matmul(av, bv, 0.25, Shape{3});
        EXPECT_TRUE(testing::all_close(scaled, scale(naive_matmul(a, b), 0.25), 1e-5, 1e-5))
            << layout << " alpha";
      }
    }
    // One matrix with fewer rows than columns: the columns are split across the threads.
    const Tensor a1 = a.select(0, 0), b1 = b.select(0, 0);
    EXPECT_TRUE(
        testing::all_close(matmul(a1, transposed_view(b1.contiguous())), naive_matmul(a1, b1), 1e-5, 1e-5))
        << what << " 2-D";
  }
}

TEST(Matmul, GradcheckShapes) {
  uint64_t seed = 100;
  for (const ShapeCase& c : kShapes) {
    const Tensor a = testing::random_tensor(c.a, seed++).set_requires_grad(true);
    const Tensor b = testing::random_tensor(c.b, seed++).set_requires_grad(true);
    EXPECT_TRUE(
        testing::gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b}))
        << shape_str(c.a) << " @ " << shape_str(c.b);
  }
}

TEST(Matmul, GradcheckThroughTransposedViews) {
  const Tensor a = testing::random_tensor({2, 4, 3}, 21).set_requires_grad(true);
  const Tensor b = testing::random_tensor({5, 4}, 22).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return matmul(in[0].permute({0, 2, 1}), in[1].permute({1, 0}));
      },
      {a, b}));
}

TEST(Matmul, BroadcastGradientIsSummedOverBatch) {
  // [2, 2] shared by a batch of 3: its gradient is the sum of the three per-matrix gradients.
  const Tensor a = Tensor::from_vector<double>({1, 0, 0, 1}, {2, 2}).set_requires_grad(true);
  const Tensor b = Tensor::ones({3, 2, 2}, DType::f64);
  matmul(a, b).backward(Tensor::ones({3, 2, 2}, DType::f64));
  EXPECT_EQ(a.grad().shape(), (Shape{2, 2}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{6, 6, 6, 6}));
}

TEST(Bmm, ForwardAndGradcheck) {
  const Tensor a = testing::random_tensor({3, 2, 4}, 31).set_requires_grad(true);
  const Tensor b = testing::random_tensor({3, 4, 5}, 32).set_requires_grad(true);
  EXPECT_TRUE(testing::all_close(bmm(a, b), naive_matmul(a, b), 1e-12, 1e-12));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); }, {a, b}));
}

TEST(Matmul, ErrorsNameBothShapes) {
  try {
    matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({5, 2}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: [2, 3, 4] @ [5, 2]: inner dimensions 4 and 5 differ"),
              std::string::npos)
        << e.what();
  }
  try {
    matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("batch dims [2] and [3] do not broadcast"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(matmul(Tensor::zeros({}), Tensor::zeros({3})), ShapeError);
  EXPECT_THROW(matmul(Tensor::zeros({3}), Tensor::zeros({4})), ShapeError);
  EXPECT_THROW(matmul(Tensor::zeros({3, 3}, DType::i32), Tensor::zeros({3, 3}, DType::i32)), DTypeError);
  EXPECT_THROW(bmm(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})), ShapeError);
  EXPECT_THROW(bmm(Tensor::zeros({2, 2, 3}), Tensor::zeros({1, 3, 2})), ShapeError);
  EXPECT_THROW(bmm(Tensor::zeros({2, 2, 3}), Tensor::zeros({2, 3, 2}, DType::f64)), DTypeError);
}

TEST(Linear, NdInputFlattensLeadingDims) {
  const Tensor x = testing::random_tensor({2, 3, 4}, 41);
  const Tensor w = testing::random_tensor({5, 4}, 42);
  const Tensor b = testing::random_tensor({5}, 43);
  const Tensor y = linear(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
  const Tensor expected = naive_matmul(x, w.permute({1, 0}));
  const std::vector<double> bias = b.to_vector<double>(), ref = expected.to_vector<double>();
  std::vector<double> with_bias(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) with_bias[i] = ref[i] + bias[i % 5];
  EXPECT_TRUE(testing::all_close(y, Tensor::from_vector<double>(with_bias, {2, 3, 5}), 1e-12, 1e-12));
  // Non-contiguous input (permuted batch dims) gives the same rows.
  const Tensor xp = x.permute({1, 0, 2}).contiguous().permute({1, 0, 2});
  EXPECT_TRUE(testing::all_close(linear(xp, w, b), y, 1e-12, 1e-12));
  // 1-D input -> [out].
  const Tensor y1 = linear(x.select(0, 1).select(0, 2), w, b);
  EXPECT_EQ(y1.shape(), (Shape{5}));
  EXPECT_TRUE(testing::all_close(y1, y.select(0, 1).select(0, 2), 1e-12, 1e-12));
}

TEST(Linear, NdGradcheck) {
  const Tensor x = testing::random_tensor({2, 2, 3}, 44).set_requires_grad(true);
  const Tensor w = testing::random_tensor({4, 3}, 45).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4}, 46).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                                 {x, w, b}));
  const Tensor x1 = testing::random_tensor({3}, 47).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                                 {x1, w, b}));
}

}  // namespace
}  // namespace liftoff
