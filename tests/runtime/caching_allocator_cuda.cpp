#include <gtest/gtest.h>

#include "runtime/tensor.h"
#include "tests/common/cuda_test.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/context.h"
#endif

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA
using cuda::CachingAllocator;

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), 1u << 20);
  // Above 1 MiB: four classes per power of two, so waste stays under 25%.
  const size_t big = (5u << 20) + 1;
  EXPECT_GE(CachingAllocator::size_class(big), big);
  EXPECT_LE(CachingAllocator::size_class(big), big + big / 4);
}

TEST(CachingAllocator, ReusesFreedBlocksWithoutCudaMalloc) {
  LIFTOFF_REQUIRE_CUDA();
  auto& alloc = CachingAllocator::get();
  void* first = alloc.allocate(3000000, 0);
  alloc.free(first);
  const auto before = alloc.stats(0);
  void* second = alloc.allocate(3000000, 0);
  const auto after = alloc.stats(0);
  EXPECT_EQ(first, second);
  EXPECT_EQ(after.num_cuda_mallocs, before.num_cuda_mallocs);
  alloc.free(second);
}

TEST(CachingAllocator, StatsTrackAllocatedReservedAndPeak) {
  LIFTOFF_REQUIRE_CUDA();
  auto& alloc = CachingAllocator::get();
  alloc.empty_cache();
  alloc.reset_peak(0);
  const auto base = alloc.stats(0);
  {
    const Tensor a = Tensor::empty({1 << 20}, DType::f32, Device::cuda(0));  // 4 MiB
    const auto during = alloc.stats(0);
    EXPECT_EQ(during.allocated - base.allocated, CachingAllocator::size_class(4u << 20));
    EXPECT_GE(during.reserved, during.allocated);
    EXPECT_GE(during.peak_allocated, during.allocated);
  }
  const auto after = alloc.stats(0);
  EXPECT_EQ(after.allocated, base.allocated);
  EXPECT_GT(after.reserved, after.allocated);  // the block stays cached
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats(0).reserved, alloc.stats(0).allocated);
}

TEST(CachingAllocator, OutOfMemoryIsAClearError) {
  LIFTOFF_REQUIRE_CUDA();
  try {
    Tensor::empty({int64_t{1} << 48}, DType::f32, Device::cuda(0));  // 1 PiB
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA out of memory on cuda:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tried to allocate"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--batch"), std::string::npos) << msg;
  }
  // The allocator still works afterwards.
  EXPECT_NO_THROW(Tensor::zeros({1}, DType::f32, Device::cuda(0)).item());
}

TEST(CudaTensor, RoundTripsAndCopiesAcrossLayouts) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor host = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  const Tensor dev = host.to(Device::cuda(0));
  EXPECT_EQ(dev.to_vector<float>(), host.to_vector<float>());
  EXPECT_EQ(dev.permute({1, 0}).contiguous().to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(dev.to(DType::bf16).to(DType::f64).to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  const Tensor counter = Tensor::zeros({1}, DType::i64, Device::cuda(0));
  const Tensor big = Tensor::full({1}, 16777217.0, DType::i64, Device::cuda(0));
  accumulate_into(counter, big);
  accumulate_into(counter, Tensor::ones({1}, DType::i64, Device::cuda(0)));
  EXPECT_EQ(counter.to_vector<int64_t>()[0], 16777218);  // exact beyond f32's 2^24
  dev.select(0, 1).fill_(7);
  EXPECT_EQ(dev.to_vector<float>(), (std::vector<float>{0, 1, 2, 7, 7, 7}));
}
#else
TEST(CachingAllocator, NeedsCuda) { GTEST_SKIP() << "this build has no CUDA backend"; }
#endif

}  // namespace
}  // namespace liftoff
