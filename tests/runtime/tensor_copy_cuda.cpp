// The CUDA copy/fill/accumulate kernels behind Tensor's own methods (runtime/cuda/tensor_kernels.cu): linear
// casts (vectorised, and misaligned), strided copies (permutes, views into a strided destination), zero fills
// (a memset when dense, a kernel into views), gradient accumulation. Each result is compared element by
// element with the CPU doing the same on the same values (exact: the values are representable in every dtype
// used).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/tensor.h"
#include "tests/common/cuda_test.h"

namespace liftoff {
namespace {

// Values k/8 for small k: exact in f16, bf16, f32 and f64, distinct enough to catch a misplaced element.
Tensor exact_values(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<int>(i * 37 % 251) - 125) / 8.0f;
  return Tensor::from_vector(v, shape);
}

::testing::AssertionResult same(const Tensor& device_result, const Tensor& cpu_result) {
  if (device_result.shape() != cpu_result.shape())
    return ::testing::AssertionFailure()
           << "shapes " << shape_str(device_result.shape()) << " vs " << shape_str(cpu_result.shape());
  const Tensor a = device_result.to(Device::cpu(), DType::f64).contiguous();
  const Tensor b = cpu_result.to(DType::f64).contiguous();
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (a.data<double>()[i] != b.data<double>()[i])
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a.data<double>()[i] << " vs " << b.data<double>()[i];
  }
  return ::testing::AssertionSuccess();
}

TEST(TensorCopyCuda, PermutedCopiesWithCastsMatchTheCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor host = exact_values({3, 5, 7, 9});
  const std::vector<std::vector<int64_t>> orders{{0, 2, 3, 1}, {3, 2, 1, 0}, {0, 1, 3, 2}, {1, 0, 2, 3}};
  for (const DType from : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    const Tensor src_host = host.to(from);
    const Tensor src_dev = src_host.to(Device::cuda());
    for (const DType to : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      for (const auto& order : orders) {
        const Tensor expected = src_host.permute(order).contiguous().to(to);
        EXPECT_TRUE(same(src_dev.permute(order).to(to), expected))
            << dtype_name(from) << " -> " << dtype_name(to) << " order " << order[0] << order[1] << order[2]
            << order[3];
        EXPECT_TRUE(same(src_dev.permute(order).contiguous(), src_host.permute(order).contiguous()));
      }
    }
  }
}

// Layout changes that are transposes of the two innermost compacted dimensions run the tiled kernel: conv
// weights KCRS <-> KRSC, activations NCHW <-> NHWC (several tiles along both dimensions, partial edge tiles),
// with and without casts; a batch beyond the grid's limit takes the element-wise kernel.
TEST(TensorCopyCuda, TransposedLayoutsAcrossTilesMatchTheCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const std::vector<Shape> shapes{
      {64, 48, 3, 3}, {5, 130, 3, 3}, {4, 3, 40, 50}, {2, 200, 9, 11}, {3, 2, 1, 70}};
  for (const Shape& shape : shapes) {
    const Tensor host = exact_values(shape);
    for (const DType from : {DType::f32, DType::bf16, DType::f64}) {
      const Tensor src_host = host.to(from);
      const Tensor src_dev = src_host.to(Device::cuda());
      for (const DType to : {DType::f32, DType::bf16}) {
        const Tensor nhwc_dev = src_dev.to(to).contiguous(MemoryFormat::channels_last);
        const Tensor cast_nhwc = Tensor::empty(shape, to, Device::cuda(), MemoryFormat::channels_last);
        cast_nhwc.copy_(src_dev);  // cast and transpose in one copy
        const Tensor expected = src_host.to(to);
        EXPECT_TRUE(same(nhwc_dev, expected)) << shape_str(shape) << " " << dtype_name(from);
        EXPECT_TRUE(same(cast_nhwc, expected)) << shape_str(shape) << " " << dtype_name(from);
        EXPECT_TRUE(nhwc_dev.is_channels_last());
        const Tensor back = Tensor::empty(shape, from, Device::cuda());
        back.copy_(cast_nhwc);  // NHWC -> NCHW with the cast back
        EXPECT_TRUE(same(back, src_host.to(to).to(from))) << shape_str(shape) << " back";
      }
    }
  }
  const Tensor wide = exact_values({70000, 2, 3});
  EXPECT_TRUE(
      same(wide.to(Device::cuda()).permute({0, 2, 1}).contiguous(), wide.permute({0, 2, 1}).contiguous()));
}

TEST(TensorCopyCuda, LinearCastsAtEveryAlignmentAndLength) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor host = exact_values({1031});
  for (const DType from : {DType::f32, DType::bf16}) {
    const Tensor src_dev = host.to(Device::cuda(), from);
    for (const DType to : {DType::f32, DType::bf16, DType::f16}) {
      for (const int64_t start : {0, 1, 3, 8}) {
        for (const int64_t length : {1, 7, 8, 9, 1000}) {
          const Tensor expected = host.slice(0, start, start + length).to(from).to(to);
          // Into a fresh tensor (aligned), and into a view one element in (misaligned destination).
          EXPECT_TRUE(same(src_dev.slice(0, start, start + length).to(to), expected))
              << dtype_name(from) << " -> " << dtype_name(to) << " start " << start << " length " << length;
          const Tensor dst = Tensor::zeros({length + 1}, to, Device::cuda());
          dst.slice(0, 1, length + 1).copy_(src_dev.slice(0, start, start + length));
          EXPECT_TRUE(same(dst.slice(0, 1, length + 1), expected));
          EXPECT_TRUE(same(dst.slice(0, 0, 1), Tensor::zeros({1}, to)));
        }
      }
    }
  }
}

TEST(TensorCopyCuda, CopiesIntoStridedViews) {
  LIFTOFF_REQUIRE_CUDA();
  // A column block of a wider matrix as the destination (rows 12 apart, 5 used), from a transposed source.
  const Tensor src_host = exact_values({5, 4});
  const Tensor dst_host = Tensor::zeros({4, 12});
  dst_host.slice(1, 3, 8).copy_(src_host.permute({1, 0}));
  const Tensor dst_dev = Tensor::zeros({4, 12}, DType::bf16, Device::cuda());
  dst_dev.slice(1, 3, 8).copy_(src_host.to(Device::cuda()).permute({1, 0}));
  EXPECT_TRUE(same(dst_dev, dst_host));
}

TEST(TensorCopyCuda, ZeroAndValueFillsOfDenseTensorsAndViews) {
  LIFTOFF_REQUIRE_CUDA();
  for (const DType dt : {DType::f32, DType::bf16, DType::f64, DType::i64}) {
    const Tensor dense = Tensor::full({3, 70}, 2.5, dt, Device::cuda());
    dense.zero_();
    EXPECT_TRUE(same(dense, Tensor::zeros({3, 70}, dt))) << dtype_name(dt);
    // A column block (not dense): only its elements change.
    const Tensor host = Tensor::full({3, 70}, 2.0, dt);
    const Tensor dev = host.to(Device::cuda());
    host.slice(1, 5, 40).zero_();
    dev.slice(1, 5, 40).zero_();
    EXPECT_TRUE(same(dev, host)) << dtype_name(dt);
    host.slice(1, 41, 69).fill_(-3.0);
    dev.slice(1, 41, 69).fill_(-3.0);
    EXPECT_TRUE(same(dev, host)) << dtype_name(dt);
  }
  // -0.0 keeps its sign bit (not a memset of zeros).
  const Tensor neg = Tensor::full({9}, 1.0, DType::f32, Device::cuda());
  neg.fill_(-0.0);
  const Tensor back = neg.to(Device::cpu());
  EXPECT_TRUE(std::signbit(back.data<float>()[4]));
}

}  // namespace
}  // namespace liftoff
