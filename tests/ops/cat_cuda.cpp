#include <gtest/gtest.h>

#include "ops/cat/cat.h"
#include "ops/views/views.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"
#include "tests/ops/shape_testing.h"

namespace liftoff {
namespace {

const DType kAllFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

testing::ParityOptions exact(DType dtype) {
  testing::ParityOptions o;
  o.cuda_dtype = dtype;
  // Pure copies: the only error is the cast of the inputs, which the CPU reference does not see.
  if (dtype == DType::f16 || dtype == DType::bf16) o.atol = o.rtol = 1e-2;
  return o;
}

TEST(CatCuda, ManyStridedInputsEveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  std::vector<Tensor> inputs;
  for (int i = 0; i < 37; ++i) {  // more than one launch's worth of inputs
    inputs.push_back(
        testing::random_tensor({3, 1 + i % 4, 5}, 10 + i, -1, 1, DType::f32).set_requires_grad(true));
  }
  for (DType dtype : kAllFloats) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(
        testing::cuda_parity([](const std::vector<Tensor>& in) { return cat(in, 1); }, inputs, exact(dtype)));
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          std::vector<Tensor> t;
          for (const Tensor& x : in) t.push_back(transpose(x, 0, 2));
          return cat(t, 1);  // transposed (strided) inputs, still joined along their varying dim
        },
        inputs, exact(dtype)));
  }
}

// Contiguous inputs whose runs are whole 16-byte packs take the rows kernel: along the last dim (split's
// backward of a [N, L, 3 E] projection), a middle dim, the first dim, and more inputs than one launch holds.
TEST(CatCuda, ContiguousRowsInSixteenByteRuns) {
  LIFTOFF_REQUIRE_CUDA();
  const auto pieces = [](int count, const Shape& first, int64_t dim, uint64_t seed) {
    std::vector<Tensor> out;
    for (int i = 0; i < count; ++i) {
      Shape shape = first;
      shape[static_cast<size_t>(dim)] *= 1 + i % 3;
      out.push_back(testing::random_tensor(shape, seed + i, -1, 1, DType::f32).set_requires_grad(true));
    }
    return out;
  };
  for (DType dtype : kAllFloats) {
    SCOPED_TRACE(dtype_name(dtype));
    for (const int64_t dim : {2, 1, 0}) {
      const std::vector<Tensor> three = pieces(3, {3, 5, 24}, dim, 40);
      EXPECT_TRUE(testing::cuda_parity([dim](const std::vector<Tensor>& in) { return cat(in, dim); }, three,
                                       exact(dtype)))
          << "dim " << dim;
    }
    const std::vector<Tensor> many = pieces(19, {2, 16, 3}, 1, 60);
    EXPECT_TRUE(
        testing::cuda_parity([](const std::vector<Tensor>& in) { return cat(in, 1); }, many, exact(dtype)));
  }
}

TEST(CatCuda, StackAndIntegers) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({4, 3}, 1, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4, 3}, 2, -1, 1, DType::f32).set_requires_grad(true);
  for (DType dtype : kAllFloats) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return stack({in[0], in[1], in[0]}, 1);
        },
        {a, b}, exact(dtype)));
  }
  const Tensor i = testing::i64({1, 2, 3, 4}, {2, 2}, Device::cuda(0));
  EXPECT_EQ(cat({i, transpose(i, 0, 1)}, 0).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, 3, 4, 1, 3, 2, 4}));
}

TEST(CatCuda, ChannelsLastAlongChannelsStaysChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({2, 3, 4, 5}, 1, -1, 1, DType::f32);
  const Tensor b = testing::random_tensor({2, 5, 4, 5}, 2, -1, 1, DType::f32);
  const Tensor ca = a.to(Device::cuda(0)).contiguous(MemoryFormat::channels_last);
  const Tensor cb = b.to(Device::cuda(0)).contiguous(MemoryFormat::channels_last);
  const Tensor out = cat({ca, cb}, 1);
  EXPECT_TRUE(out.is_channels_last());
  EXPECT_TRUE(testing::all_close(out.to(Device::cpu()), cat({a, b}, 1), 0, 0));
}

}  // namespace
}  // namespace liftoff
