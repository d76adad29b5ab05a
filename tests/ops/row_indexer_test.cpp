// The index math of the broadcasting elementwise kernels (ops/common/row_indexer.h), run on the host: the
// multiply-high divider against plain division, and the row indexer's offsets against a plain walk of the
// plan for the shapes the fast paths exist for (row broadcast, per-channel NCHW/NHWC bias, scalars,
// transposed and sliced inputs).
#include "ops/common/row_indexer.h"

#include <gtest/gtest.h>

#include <random>

#include "ops/common/elementwise.h"

namespace liftoff {
namespace {

TEST(FastDivider, MatchesDivisionOverTheWholeRange) {
  std::mt19937 rng(5);
  std::vector<uint32_t> divisors = {1, 2, 3, 7, 64, 1000, 1024, 3136, 65535, 65536, 1u << 30, (1u << 31) - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % ((1u << 31) - 1));
  for (uint32_t d : divisors) {
    const FastDivider div(d);
    std::vector<uint32_t> numerators = {0, 1, d - 1, d, (1u << 31) - 1, (1u << 31) - 2};
    if (d < (1u << 30)) numerators.push_back(2 * d + 1);
    for (int i = 0; i < 2000; ++i) numerators.push_back(rng() % (1u << 31));
    for (uint32_t n : numerators) {
      if (n >= (1u << 31)) continue;
      ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
    }
  }
}

// Offsets of every output element by decomposing the index over the plan (the reference).
std::vector<int64_t> walk_offsets(const ElementwisePlan& plan, int k, int64_t i) {
  std::vector<int64_t> off(1, 0);
  for (int d = plan.dims - 1; d >= 0; --d) {
    off[0] += (i % plan.sizes[d]) * plan.strides[k][d];
    i /= plan.sizes[d];
  }
  return off;
}

struct Operands {
  Shape out;
  std::vector<Tensor> inputs;
  MemoryFormat format = MemoryFormat::contiguous;
};

template <class Index>
void expect_offsets_match(const Operands& o, int pack) {
  const ElementwisePlan plan = make_elementwise_plan("test", o.out, o.format, o.inputs);
  ASSERT_GE(plan.dims, 1);
  constexpr int K = 2;
  const bool is_tensor[K] = {true, plan.inputs > 1};
  const bool aligned[K] = {true, true};
  const RowIndexer<Index, K> ix = make_row_indexer<Index, K>(plan, is_tensor, aligned, pack);
  for (int64_t i = 0; i < plan.numel; ++i) {
    Index off[K];
    const Index col = ix.element_offsets(static_cast<Index>(i), off);
    ASSERT_EQ(static_cast<int64_t>(col), i % plan.sizes[plan.dims - 1]);
    for (int k = 0; k < plan.inputs; ++k) {
      ASSERT_EQ(static_cast<int64_t>(off[k]), walk_offsets(plan, k, i)[0])
          << "input " << k << " element " << i << " of " << shape_str(o.out);
    }
  }
}

std::vector<Operands> broadcast_cases() {
  const Tensor big = Tensor::zeros({6, 8, 5, 4});
  const Tensor nhwc = big.contiguous(MemoryFormat::channels_last);
  return {
      {{64, 32}, {Tensor::zeros({64, 32}), Tensor::zeros({32})}},                        // row broadcast
      {{64, 32}, {Tensor::zeros({64, 32}), Tensor::zeros({64, 1})}},                     // column broadcast
      {{6, 8, 5, 4}, {big, Tensor::zeros({1, 8, 1, 1})}},                                // NCHW bias
      {{6, 8, 5, 4}, {nhwc, Tensor::zeros({8, 1, 1})}, MemoryFormat::channels_last},     // NHWC bias
      {{5, 1, 6}, {Tensor::zeros({5, 1, 6}), Tensor::zeros({1, 4, 1})}},                 // both broadcast
      {{12, 10}, {Tensor::zeros({10, 12}).permute({1, 0}), Tensor::zeros({12, 10})}},    // transposed
      {{7, 9}, {Tensor::zeros({7, 11}).slice(1, 1, 10), Tensor::zeros({})}},             // sliced, scalar
      {{3, 4, 5, 6, 7}, {Tensor::zeros({3, 1, 5, 1, 7}), Tensor::zeros({4, 1, 6, 1})}},  // many dims
  };
}

TEST(RowIndexer, OffsetsMatchThePlanIn32And64Bits) {
  for (const Operands& o : broadcast_cases()) {
    expect_offsets_match<uint32_t>(o, 1);
    expect_offsets_match<int64_t>(o, 1);
  }
}

TEST(RowIndexer, ChoosesHowEachInputIsRead) {
  const bool tensors[2] = {true, true};
  const bool aligned[2] = {true, true};
  const bool misaligned[2] = {true, false};
  auto reads = [&](const Operands& o, int pack, const bool* align) {
    const ElementwisePlan plan = make_elementwise_plan("test", o.out, o.format, o.inputs);
    const RowIndexer<uint32_t, 2> ix = make_row_indexer<uint32_t, 2>(plan, tensors, align, pack);
    return std::make_pair(ix.read[0], ix.read[1]);
  };
  const std::vector<Operands> cases = broadcast_cases();
  // Row broadcast: both inputs walk the row contiguously (whole packs); misaligned: element by element.
  EXPECT_EQ(reads(cases[0], 4, aligned), std::make_pair(RowRead::vector, RowRead::vector));
  EXPECT_EQ(reads(cases[0], 4, misaligned), std::make_pair(RowRead::vector, RowRead::gather));
  // Column broadcast and the NCHW bias: the second input is one value per row.
  EXPECT_EQ(reads(cases[1], 4, aligned).second, RowRead::broadcast);
  EXPECT_EQ(reads(cases[2], 4, aligned).second, RowRead::broadcast);
  // NHWC bias: rows are the channels, so the bias is read by packs.
  EXPECT_EQ(reads(cases[3], 4, aligned), std::make_pair(RowRead::vector, RowRead::vector));
  // A transposed input walks its rows with a stride: element by element.
  EXPECT_EQ(reads(cases[5], 2, aligned).first, RowRead::gather);
  // Rows of 9 from a row stride of 11: not whole packs.
  EXPECT_EQ(reads(cases[6], 1, aligned).first, RowRead::vector);
  EXPECT_EQ(reads(cases[6], 3, aligned).first, RowRead::gather);
}

}  // namespace
}  // namespace liftoff
