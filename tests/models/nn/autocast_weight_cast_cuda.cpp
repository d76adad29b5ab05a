// Conv2d and Linear under autocast on a GPU: a model whose half weights are refreshed in one batched launch
// per step (LIFTOFF_WEIGHT_CAST=batched) computes bit for bit what its twin with one cast per weight (each)
// computes, after weight updates, a module destroyed between steps, parameters moved away and back, and in a
// captured forward replayed after updates.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/nn/layers.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/config.h"
#include "runtime/graph.h"
#include "tests/common/cuda_test.h"
#include "tests/common/graph_capture.h"
#include "tests/models/nn/autocast_nets.h"

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA

std::unique_ptr<Sequential> conv_net() {
  return testing::autocast_conv_net(23);
}
using testing::random_cuda;

// The same new values into both twins' parameters, in place (an optimizer step), then a new weight version.
void update(const std::vector<Module*>& twins, uint32_t seed) {
  for (Module* m : twins) {
    uint32_t i = seed;
    for (const Tensor& p : m->parameters()) p.copy_(random_cuda(p.shape(), i++));
  }
  advance_weight_version();
}

Tensor forward(Module& net, Module* extra, const Tensor& x, DType dtype, const char* mode) {
  config::ScopedSetting setting(config::Knob::weight_cast, mode);
  NoGradGuard no_grad;
  AutocastGuard autocast(dtype);
  return net.forward(extra != nullptr ? extra->forward(x) : x);
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  ASSERT_EQ(va.size(), vb.size()) << what;
  EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0) << what;
}

class WeightCastLayersCuda : public ::testing::TestWithParam<DType> {};

TEST_P(WeightCastLayersCuda, BatchedCastsComputeWhatPerWeightCastsCompute) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  std::unique_ptr<Sequential> each = conv_net(), batched = conv_net();
  Generator gen_each(5), gen_batched(5);
  auto extra_each = std::make_unique<Conv2d>(3, 3, 3, 1, 1, true, gen_each);
  auto extra_batched = std::make_unique<Conv2d>(3, 3, 3, 1, 1, true, gen_batched);
  extra_each->to(Device::cuda());
  extra_batched->to(Device::cuda());
  const Tensor x = random_cuda({4, 3, 8, 8}, 1).contiguous(MemoryFormat::channels_last);
  for (uint32_t step = 0; step < 5; ++step) {
    const std::string what = "step " + std::to_string(step);
    if (step > 0) {
      std::vector<Module*> twins = {each.get(), batched.get()};
      if (extra_each) twins.insert(twins.end(), {extra_each.get(), extra_batched.get()});
      update(twins, 100 * step);
    }
    if (step == 2) {  // destroyed between steps: the next refresh must not reach their caches
      extra_each.reset();
      extra_batched.reset();
    }
    if (step == 3) {  // parameters moved away and back: new storage under the same tensors
      for (Module* m : {static_cast<Module*>(each.get()), static_cast<Module*>(batched.get())}) {
        m->to(Device::cpu());
        m->to(Device::cuda());
      }
    }
    const Tensor y_each = forward(*each, extra_each.get(), x, dtype, "each");
    const Tensor y_batched = forward(*batched, extra_batched.get(), x, dtype, "batched");
    expect_same_bits(y_each, y_batched, what);
  }
}

TEST_P(WeightCastLayersCuda, ACapturedForwardReplaysWithTheUpdatedWeights) {
  LIFTOFF_REQUIRE_CUDA();
  const DType dtype = GetParam();
  std::unique_ptr<Sequential> each = conv_net(), batched = conv_net();
  const Tensor x = random_cuda({4, 3, 8, 8}, 2).contiguous(MemoryFormat::channels_last);
  for (int warmup = 0; warmup < 2; ++warmup) {  // cuDNN's searches and the first copies, eagerly
    update({each.get(), batched.get()}, 10 + warmup);
    forward(*each, nullptr, x, dtype, "each");
    forward(*batched, nullptr, x, dtype, "batched");
  }
  advance_weight_version();  // the capture must record the casts, as the trainer's begin_capture ensures
  CudaGraph graph(Device::cuda());
  const Tensor y_graph =
      testing::capture_into(graph, [&] { return forward(*batched, nullptr, x, dtype, "batched"); });
  for (uint32_t step = 1; step <= 3; ++step) {
    update({each.get(), batched.get()}, 200 * step);
    graph.replay();
    expect_same_bits(forward(*each, nullptr, x, dtype, "each"), y_graph, "replay " + std::to_string(step));
  }
}

INSTANTIATE_TEST_SUITE_P(HalfTypes, WeightCastLayersCuda, ::testing::Values(DType::bf16, DType::f16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

#else
TEST(WeightCastLayersCuda, NeedsCuda) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif

}  // namespace
}  // namespace liftoff
