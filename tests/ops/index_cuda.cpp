#include <gtest/gtest.h>

#include "ops/index/index.h"
#include "ops/views/views.h"
#include "runtime/determinism.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"
#include "tests/ops/shape_testing.h"

namespace liftoff {
namespace {

const DType kAllFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

testing::ParityOptions tolerance(DType dtype) {
  testing::ParityOptions o;
  o.cuda_dtype = dtype;
  if (dtype == DType::f16 || dtype == DType::bf16) o.atol = o.rtol = 3e-2;
  return o;
}

// Indices in [0, bound) with many repeats, from a fixed pattern.
Tensor pattern_index(const Shape& shape, int64_t bound) {
  std::vector<int64_t> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<int64_t>((i * 7 + i / 3) % static_cast<size_t>(bound));
  return testing::i64(v, shape);
}

struct DeterministicScope {
  explicit DeterministicScope(bool on) : previous(deterministic_algorithms()) {
    set_deterministic_algorithms(on);
  }
  ~DeterministicScope() { set_deterministic_algorithms(previous); }
  bool previous;
};

TEST(IndexCuda, IndexSelectGatherScatterAddEveryDtypeBothModes) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({6, 5, 4}, 1, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor sel = pattern_index({40}, 5);
  const Tensor gidx = pattern_index({6, 9, 3}, 5);
  const Tensor src = testing::random_tensor({6, 10, 4}, 2, -1, 1, DType::f32).set_requires_grad(true);
  for (bool deterministic : {false, true}) {
    DeterministicScope scope(deterministic);
    for (DType dtype : kAllFloats) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (deterministic ? " deterministic" : " default"));
      EXPECT_TRUE(testing::cuda_parity(
          [](const std::vector<Tensor>& in) { return index_select(transpose(in[0], 0, 1), 0, in[1]); },
          {x, sel}, tolerance(dtype)));
      EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); },
                                       {x, gidx}, tolerance(dtype)));
      EXPECT_TRUE(testing::cuda_parity(
          [](const std::vector<Tensor>& in) { return scatter_add(in[0], 1, in[2], in[1]); }, {x, src, gidx},
          tolerance(dtype)));
    }
  }
}

TEST(IndexCuda, DeterministicModeGivesSameBits) {
  LIFTOFF_REQUIRE_CUDA();
  DeterministicScope scope(true);
  const Tensor x =
      testing::random_tensor({64, 32}, 3, -1, 1, DType::f32).to(Device::cuda(0)).set_requires_grad(true);
  const Tensor idx = pattern_index({4096}, 64).to(Device::cuda(0));
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    x.set_grad(Tensor());
    index_select(x, 0, idx).backward(Tensor::ones({4096, 32}, DType::f32, Device::cuda(0)));
    const auto g = x.grad().to_vector<float>();
    if (run == 0)
      first = g;
    else
      EXPECT_EQ(g, first);
  }
}

TEST(IndexCuda, IntegerScatterAndGather) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor idx = testing::i64({1, 1, 0}, {3}, cuda);
  const Tensor out =
      scatter_add(Tensor::zeros({3}, DType::i64, cuda), 0, idx, testing::i64({5, 6, 7}, {3}, cuda));
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{7, 11, 0}));
  const Tensor ints = testing::arange({4}, DType::i32).to(cuda);
  EXPECT_EQ(gather(ints, 0, idx).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 0}));
  EXPECT_EQ(index_select(ints, 0, idx).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 0}));
}

}  // namespace
}  // namespace liftoff
