// The master weights' half gradients under autocast on a GPU: converted into .grad in one batched launch at
// the end of each backward (LIFTOFF_GRAD_CAST=batched, runtime/leaf_grad_batch.h) they hold bit for bit what
// one conversion per weight (each) gives: first gradients and accumulated ones (a second backward), a
// parameter with a gradient-ready hook (converted at once, so the hook sees its gradient), a weight that
// also reaches the loss in f32 (the half and f32 gradients summed in f32), and a captured step replayed.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/nn/layers.h"
#include "ops/add/add.h"
#include "ops/cast/cast.h"
#include "ops/reduce/reduce.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/config.h"
#include "runtime/determinism.h"
#include "runtime/graph.h"
#include "runtime/leaf_grad_batch.h"
#include "tests/common/cuda_test.h"
#include "tests/common/graph_capture.h"
#include "tests/models/nn/autocast_nets.h"

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA

std::unique_ptr<Sequential> conv_net() {
  return testing::autocast_conv_net(31);
}
using testing::random_cuda;

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  ASSERT_EQ(a.dtype(), DType::f32) << what;
  ASSERT_EQ(b.dtype(), DType::f32) << what;
  EXPECT_EQ(a.strides(), b.strides()) << what;
  const std::vector<float> va = a.contiguous().to_vector<float>(), vb = b.contiguous().to_vector<float>();
  ASSERT_EQ(va.size(), vb.size()) << what;
  EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0) << what;
}

// One backward of the net's summed output (plus, when `also_f32`, the first weight's f32 sum) under autocast.
void backward_once(Sequential& net, const Tensor& x, DType dtype, const char* mode, bool also_f32) {
  config::ScopedSetting setting(config::Knob::grad_cast, mode);
  Tensor loss;
  {
    AutocastGuard autocast(dtype);
    loss = sum(cast(net.forward(x), DType::f32));
  }
  if (also_f32) loss = add(loss, sum(net.parameters().front()));
  loss.backward();
}

// Deterministic cuDNN algorithms: the comparisons are bit for bit across separately run twins, and a weight
// gradient computed with atomics could differ between them.
class GradCastLayersCuda : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    previous_ = deterministic_algorithms();
    set_deterministic_algorithms(true);
  }
  void TearDown() override { set_deterministic_algorithms(previous_); }

 private:
  bool previous_ = false;
};

TEST_P(GradCastLayersCuda, BatchedConversionsGiveWhatPerWeightConversionsGive) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const Tensor x = random_cuda({4, 3, 8, 8}, 3).contiguous(MemoryFormat::channels_last);
  for (const bool also_f32 : {false, true}) {
    std::unique_ptr<Sequential> each = conv_net(), batched = conv_net();
    for (int pass = 0; pass < 2; ++pass) {  // the second pass accumulates into the first's .grad
      const int64_t before = detail::LeafGradBatch::deferred_total();
      backward_once(*each, x, dtype, "each", also_f32);
      EXPECT_EQ(detail::LeafGradBatch::deferred_total(), before) << "each queued gradients";
      backward_once(*batched, x, dtype, "batched", also_f32);
      EXPECT_GT(detail::LeafGradBatch::deferred_total(), before) << "batched queued none";
      const std::vector<Tensor> pe = each->parameters(), pb = batched->parameters();
      ASSERT_EQ(pe.size(), pb.size());
      for (size_t i = 0; i < pe.size(); ++i) {
        expect_same_bits(pe[i].grad(), pb[i].grad(),
                         std::string(dtype_name(dtype)) + " parameter " + std::to_string(i) + " pass " +
                             std::to_string(pass) + (also_f32 ? " (also summed in f32)" : ""));
      }
    }
  }
}

// One layer used twice in a forward: its two half gradients are summed in f32, bit for bit the sum of what
// two copies of the layer get (each converted on its own); summed in bf16 the small terms would be lost.
TEST_P(GradCastLayersCuda, ALayerUsedTwiceSumsItsHalfGradientsInF32) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  auto make = [] {
    Generator gen(41);  // the same values in every copy
    auto layer = std::make_unique<Linear>(64, 64, true, gen);
    layer->to(Device::cuda());
    return layer;
  };
  const std::unique_ptr<Linear> shared = make(), first = make(), second = make();
  const Tensor x = random_cuda({32, 64}, 6);
  auto backward_through = [&](Linear& a, Linear& b) {
    Tensor loss;
    {
      AutocastGuard autocast(dtype);
      loss = sum(cast(b.forward(a.forward(x)), DType::f32));
    }
    loss.backward();
  };
  backward_through(*shared, *shared);
  backward_through(*first, *second);
  for (const bool weight : {true, false}) {
    const Tensor got = weight ? shared->weight().grad() : shared->bias().grad();
    Tensor want = (weight ? first->weight().grad() : first->bias().grad()).clone();
    accumulate_into(want, weight ? second->weight().grad() : second->bias().grad());
    expect_same_bits(got, want, std::string(dtype_name(dtype)) + (weight ? " weight" : " bias"));
  }
}

TEST_P(GradCastLayersCuda, AHookSeesTheConvertedGradient) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const Tensor x = random_cuda({4, 3, 8, 8}, 4).contiguous(MemoryFormat::channels_last);
  std::unique_ptr<Sequential> each = conv_net(), batched = conv_net();
  backward_once(*each, x, dtype, "each", false);
  const Tensor hooked = batched->parameters()[1];  // the second conv's weight
  std::vector<float> seen;
  hooked.add_grad_ready_hook(
      [&seen](const Tensor& leaf) { seen = leaf.grad().contiguous().to_vector<float>(); });
  backward_once(*batched, x, dtype, "batched", false);
  const std::vector<float> expected = each->parameters()[1].grad().contiguous().to_vector<float>();
  ASSERT_EQ(seen.size(), expected.size());
  EXPECT_EQ(std::memcmp(seen.data(), expected.data(), seen.size() * sizeof(float)), 0);
}

TEST_P(GradCastLayersCuda, ACapturedBackwardReplaysTheConversions) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  std::unique_ptr<Sequential> each = conv_net(), batched = conv_net();
  const Tensor x = random_cuda({4, 3, 8, 8}, 5).contiguous(MemoryFormat::channels_last);
  for (int warmup = 0; warmup < 2; ++warmup) {  // cuDNN's searches eagerly; .grad exists before the capture
    backward_once(*each, x, dtype, "each", false);
    backward_once(*batched, x, dtype, "batched", false);
  }
  CudaGraph graph(Device::cuda());
  testing::capture_into(graph, [&] {
    backward_once(*batched, x, dtype, "batched", false);
    return Tensor();
  });
  for (int replay = 1; replay <= 2; ++replay) {  // each replay adds one more gradient into .grad
    graph.replay();
    backward_once(*each, x, dtype, "each", false);
    const std::vector<Tensor> pe = each->parameters(), pb = batched->parameters();
    for (size_t i = 0; i < pe.size(); ++i) {
      expect_same_bits(pe[i].grad(), pb[i].grad(),
                       "replay " + std::to_string(replay) + " parameter " + std::to_string(i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HalfTypes, GradCastLayersCuda, ::testing::Values(DType::bf16, DType::f16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

#else
TEST(GradCastLayersCuda, NeedsCuda) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif

}  // namespace
}  // namespace liftoff
