// Autocast's half weight copies on a GPU (runtime/autocast.h, runtime/cuda/weight_cast.cu): the first stale
// get() refreshes every stale cache in one batched launch, each copy in its own layout and bit for bit what
// the per-tensor cast (Tensor::to) gives; replaced masters, destroyed caches, graph capture and concurrent
// branches keep it correct.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/autocast.h"
#include "runtime/branches.h"
#include "runtime/config.h"
#include "runtime/graph.h"
#include "runtime/tensor.h"
#include "tests/common/cuda_test.h"
#include "tests/common/graph_capture.h"

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA

// Random weights with the values a cast must round carefully: ties, subnormals, overflow to inf in f16.
std::vector<float> weight_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(gen);
  const float specials[] = {1.0f + 1.0f / 256, -1.0f - 3.0f / 512, 1e-30f, -3e-41f, 7e4f, -1e5f, 0.0f, -0.0f};
  for (size_t i = 0; i < v.size() && i < 8; ++i) v[i * 7 % v.size()] = specials[i];
  return v;
}

Tensor cuda_weights(const Shape& shape, uint32_t seed) {
  return Tensor::from_vector(weight_values(shape_numel(shape), seed), shape, Device::cuda(0));
}

// A new step: every master gets new values in place (as an optimizer step writes them), then the version
// advances (as the trainer does after it).
void update(const std::vector<Tensor>& masters, uint32_t seed) {
  for (size_t i = 0; i < masters.size(); ++i) {
    masters[i].copy_(Tensor::from_vector(weight_values(masters[i].numel(), seed + static_cast<uint32_t>(i)),
                                         masters[i].shape()));
  }
  advance_weight_version();
}

// The copy holds master.to(dtype) bit for bit (f16/bf16 widen to f32 exactly), laid out in `format`.
void expect_cast_of(const Tensor& copy, const Tensor& master, DType dtype, MemoryFormat format,
                    const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(copy.dtype(), dtype);
  ASSERT_EQ(copy.shape(), master.shape());
  EXPECT_TRUE(copy.is_contiguous(format)) << "strides of a " << memory_format_name(format) << " copy";
  const std::vector<float> got = copy.to_vector<float>();
  const std::vector<float> want = master.to(dtype).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << "first at " << first << ": " << got[first] << " vs " << want[first];
}

// The weights of a small conv net: 3x3 stem (C = 3), 3x3 and 1x1 convs, a depthwise 3x3, a 3x3 whose K-row
// (C*R*S = 9216) is too long for the batched kernel, a bias, a linear layer with odd sizes (no 16-byte
// vectors past its first row), and a master that starts one element into its storage (unaligned).
struct Weights {
  std::vector<Tensor> masters;
  std::vector<MemoryFormat> formats;
  std::vector<std::unique_ptr<HalfWeightCache>> caches;

  Weights() {
    add({16, 3, 3, 3}, MemoryFormat::channels_last);
    add({64, 64, 3, 3}, MemoryFormat::channels_last);
    add({128, 64, 1, 1}, MemoryFormat::channels_last);
    add({32, 1, 3, 3}, MemoryFormat::channels_last);
    add({8, 1024, 3, 3}, MemoryFormat::channels_last);
    add({7, 5, 5, 5}, MemoryFormat::channels_last);
    add({64}, MemoryFormat::contiguous);
    add({10, 517}, MemoryFormat::contiguous);
    add({20000}, MemoryFormat::contiguous);  // several chunks
    const Tensor base = cuda_weights({1 + 33 * 17}, 99);
    masters.push_back(base.slice(0, 1, 1 + 33 * 17).view({33, 17}));
    formats.push_back(MemoryFormat::contiguous);
    caches.push_back(std::make_unique<HalfWeightCache>());
  }
  void add(const Shape& shape, MemoryFormat format) {
    masters.push_back(cuda_weights(shape, static_cast<uint32_t>(masters.size())));
    formats.push_back(format);
    caches.push_back(std::make_unique<HalfWeightCache>());
  }
  std::vector<Tensor> get_all(DType dtype) const {
    std::vector<Tensor> out;
    for (size_t i = 0; i < masters.size(); ++i) out.push_back(caches[i]->get(masters[i], dtype, formats[i]));
    return out;
  }
  void expect_casts(const std::vector<Tensor>& copies, DType dtype, const std::string& when) const {
    for (size_t i = 0; i < masters.size(); ++i) {
      expect_cast_of(copies[i], masters[i], dtype, formats[i],
                     when + ", weight " + std::to_string(i) + " " + shape_str(masters[i].shape()));
    }
  }
};

class WeightCastCuda : public ::testing::TestWithParam<DType> {
  config::ScopedSetting batched_{config::Knob::weight_cast, "batched"};  // whatever the environment says
};

TEST_P(WeightCastCuda, EveryCopyEqualsThePerTensorCastAfterEachUpdate) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  Weights w;
  w.expect_casts(w.get_all(dtype), dtype, "first copies");
  for (uint32_t step = 1; step <= 3; ++step) {
    update(w.masters, 1000 * step);
    w.expect_casts(w.get_all(dtype), dtype, "step " + std::to_string(step));
  }
}

TEST_P(WeightCastCuda, TheFirstStaleGetRefreshesEveryStaleCache) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const char* mode : {"batched", "each"}) {
    SCOPED_TRACE(mode);
    config::ScopedSetting setting(config::Knob::weight_cast, mode);
    Weights w;
    w.get_all(dtype);
    update(w.masters, 7);
    const Tensor first = w.caches[1]->get(w.masters[1], dtype, w.formats[1]);
    // Written after the refresh without a new version: a batched refresh has already cast the old values.
    const Tensor old_linear = w.masters[7].clone();
    w.masters[7].fill_(0.25);
    const Tensor linear = w.caches[7]->get(w.masters[7], dtype, w.formats[7]);
    const bool batched = std::string(mode) == "batched";
    expect_cast_of(linear, batched ? old_linear : w.masters[7], dtype, w.formats[7], "linear weight");
    // The over-long K-row (weight 4) is never batched: it casts at its own get().
    w.masters[4].fill_(-0.5);
    expect_cast_of(w.caches[4]->get(w.masters[4], dtype, w.formats[4]), w.masters[4], dtype, w.formats[4],
                   "long-row weight");
    expect_cast_of(first, w.masters[1], dtype, w.formats[1], "the caller");
  }
}

TEST_P(WeightCastCuda, BatchedCopiesKeepTheirAddressesAcrossSteps) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  Weights w;
  std::vector<const void*> addresses;
  for (const Tensor& copy : w.get_all(dtype)) addresses.push_back(copy.raw_data());
  update(w.masters, 11);
  const std::vector<Tensor> copies = w.get_all(dtype);
  w.expect_casts(copies, dtype, "after the update");
  EXPECT_EQ(copies[1].raw_data(), addresses[1]) << "a copy nobody else held is rewritten in place";
  EXPECT_EQ(copies[7].raw_data(), addresses[7]);
  // Held by the test now: the next refresh must not overwrite what we hold.
  const std::vector<float> held = copies[2].to_vector<float>();
  update(w.masters, 12);
  const std::vector<Tensor> next = w.get_all(dtype);
  w.expect_casts(next, dtype, "while the old copies are held");
  EXPECT_NE(next[2].raw_data(), copies[2].raw_data());
  EXPECT_EQ(copies[2].to_vector<float>(), held);
}

TEST_P(WeightCastCuda, AReplacedMasterIsCastFromTheNewOne) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  Weights w;
  w.get_all(dtype);
  // Weight 1 gets a new tensor (a reload), weight 2 loses its old one altogether.
  const Tensor kept_old = w.masters[1];
  w.masters[1] = cuda_weights(w.masters[1].shape(), 555);
  w.masters[2] = cuda_weights(w.masters[2].shape(), 556);
  update(w.masters, 21);
  kept_old.fill_(3.0);  // the old master, still alive, changes too: a copy of it must not be served
  w.expect_casts(w.get_all(dtype), dtype, "replaced masters");
}

TEST_P(WeightCastCuda, ADestroyedCacheLeavesTheRegistry) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const size_t before = half_weight_cache_count();
  {
    Weights w;
    EXPECT_EQ(half_weight_cache_count(), before + w.caches.size());
    w.get_all(dtype);
    // Destroyed between steps, with its master: the next refresh must not reach either.
    w.caches[3].reset();
    w.masters[3] = Tensor();
    EXPECT_EQ(half_weight_cache_count(), before + w.caches.size() - 1);
    update({w.masters[0], w.masters[1]}, 31);
    for (size_t i : {0u, 1u, 2u}) {
      expect_cast_of(w.caches[i]->get(w.masters[i], dtype, w.formats[i]), w.masters[i], dtype, w.formats[i],
                     "weight " + std::to_string(i));
    }
  }
  EXPECT_EQ(half_weight_cache_count(), before);
}

TEST_P(WeightCastCuda, ACapturedRefreshReplaysWithTheNewWeights) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  Weights w;
  w.get_all(dtype);          // the eager warm-up step
  advance_weight_version();  // what the trainer does before it captures
  CudaGraph graph(Device::cuda(0));
  const std::vector<Tensor> captured = testing::capture_into(graph, [&] { return w.get_all(dtype); });
  for (uint32_t step = 1; step <= 3; ++step) {
    update(w.masters, 40 + step);  // between replays, outside the graph
    graph.replay();
    w.expect_casts(captured, dtype, "replay " + std::to_string(step));
  }
  // Eager again after the replays: correct, and the graph's copies stay its own.
  update(w.masters, 50);
  w.expect_casts(w.get_all(dtype), dtype, "eager after the graph");
  update(w.masters, 51);
  graph.replay();
  w.expect_casts(captured, dtype, "replay after the eager step");
}

// A capture's batched refresh also casts the stale caches of a model the captured code never touches; the
// graph keeps that model's masters and copies alive, so destroying the model while the graph exists frees
// nothing the replays read or write (the new tensors never land on those blocks).
TEST_P(WeightCastCuda, AnotherModelsCachesInACaptureStayAliveWithTheGraph) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  Weights mine;
  auto other = std::make_unique<Weights>();
  mine.get_all(dtype);
  other->get_all(dtype);
  advance_weight_version();
  std::vector<const void*> other_blocks;
  {
    CudaGraph graph(Device::cuda(0));
    const std::vector<Tensor> captured = testing::capture_into(graph, [&] { return mine.get_all(dtype); });
    for (size_t i = 0; i < other->masters.size(); ++i) {
      if (i != 4) other_blocks.push_back(other->masters[i].raw_data());  // 4: too long a K-row, cast alone
    }
    other.reset();  // the other model goes while the graph may still replay
    std::vector<Tensor> fresh;
    for (int round = 0; round < 4; ++round) {
      for (const Tensor& m : mine.masters)
        fresh.push_back(Tensor::empty(m.shape(), DType::f32, Device::cuda(0)));
    }
    for (const Tensor& t : fresh) {
      for (const void* block : other_blocks) EXPECT_NE(t.raw_data(), block) << "a block the graph reads";
    }
    update(mine.masters, 70);
    graph.replay();
    mine.expect_casts(captured, dtype, "replay after the other model was destroyed");
  }
}

// A capture that fails leaves no copy that was refreshed inside it (and never written) looking current.
TEST_P(WeightCastCuda, AnAbortedCaptureLeavesNoUnwrittenCopies) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  Weights w;
  w.get_all(dtype);
  update(w.masters, 80);
  CudaGraph graph(Device::cuda(0));
  EXPECT_THROW(testing::capture_into(graph,
                                     [&] {
                                       w.get_all(dtype);
                                       throw ValueError("the captured step failed");
                                       return std::vector<Tensor>{};
                                     }),
               ValueError);
  w.expect_casts(w.get_all(dtype), dtype, "eager after the aborted capture");
}

TEST_P(WeightCastCuda, ALaterBranchWaitsForTheRefreshOfAnEarlierOne) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const Device cuda = Device::cuda(0);
  Weights w;
  w.get_all(dtype);
  update(w.masters, 61);
  const Tensor scratch = Tensor::zeros({1 << 22}, DType::f32, cuda);
  Tensor seen;
  {
    ConcurrentBranches branches(cuda, 2);
    branches.enter(0);
    for (int i = 0; i < 40; ++i) accumulate_into(scratch, scratch);  // a long detour before the refresh
    w.caches[0]->get(w.masters[0], dtype, w.formats[0]);             // refreshes weight 1 too
    branches.enter(1);
    seen = w.caches[1]->get(w.masters[1], dtype, w.formats[1]).clone();  // on lane 1: must wait for it
    branches.join();
  }
  expect_cast_of(seen, w.masters[1], dtype, MemoryFormat::contiguous, "read on the second branch");
}

INSTANTIATE_TEST_SUITE_P(HalfTypes, WeightCastCuda, ::testing::Values(DType::bf16, DType::f16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

#else
TEST(WeightCastCuda, NeedsCuda) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif

}  // namespace
}  // namespace liftoff
