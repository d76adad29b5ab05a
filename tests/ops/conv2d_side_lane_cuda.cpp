// Convolution weight gradients on the backward's side lane (runtime/branches.h, LIFTOFF_WGRAD_LANE): the same
// bits as on one stream, eagerly and in a captured graph, f32 and under bf16 autocast (whose weight gradients
// reach f32 masters through the leaf-gradient batch); a weight used twice sums its two gradients; a leaf with
// a gradient hook keeps the backward on one stream.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ops/binary/binary.h"
#include "ops/conv2d/conv2d.h"
#include "ops/reduce/reduce.h"
#include "ops/relu/relu.h"
#include "runtime/autocast.h"
#include "runtime/branches.h"
#include "runtime/config.h"
#include "runtime/determinism.h"
#include "runtime/graph.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA

struct Net {
  std::vector<Tensor> leaves;  // x, w1, b1, w_depthwise, w2

  Net() {
    const Device cuda = Device::cuda(0);
    const auto leaf = [&](const Shape& shape, uint64_t seed, double scale) {
      leaves.push_back(
          testing::random_tensor(shape, seed, -scale, scale, DType::f32, cuda).set_requires_grad(true));
    };
    leaf({8, 16, 12, 12}, 1, 1.0);
    leaf({32, 16, 3, 3}, 2, 0.2);
    leaf({32}, 3, 0.5);
    leaf({32, 1, 3, 3}, 4, 0.5);
    leaf({32, 32, 3, 3}, 5, 0.1);
  }

  Tensor loss() const {
    const Tensor h = relu(conv2d(leaves[0], leaves[1], leaves[2], 1, 1));
    const Tensor d = relu(conv2d(h, leaves[3], Tensor(), 1, 1, 1, 32));  // depthwise
    const Tensor a = conv2d(d, leaves[4], Tensor(), 1, 1);
    const Tensor b = conv2d(relu(a), leaves[4], Tensor(), 2, 1);  // w2 again: its two gradients are summed
    return sum(mul(b, b));
  }

  std::vector<Tensor> grads() const {
    std::vector<Tensor> out;
    for (const Tensor& t : leaves) out.push_back(t.grad().to(Device::cpu()));
    return out;
  }
  void clear_grads() const {
    for (const Tensor& t : leaves) t.set_grad(Tensor());
  }
};

// Bitwise comparison of two gradient lists.
::testing::AssertionResult same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].defined() || !b[i].defined() || a[i].nbytes() != b[i].nbytes()) {
      return ::testing::AssertionFailure() << "gradient " << i << " missing or of another size";
    }
    if (std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].nbytes()) != 0) {
      return ::testing::AssertionFailure() << "gradient " << i << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<Tensor> eager_grads(const std::string& mode, DType amp) {
  config::ScopedSetting lane(config::Knob::wgrad_lane, mode);
  AutocastGuard autocast(amp);
  Net net;
  net.loss().backward();
  return net.grads();
}

class SideLaneCuda : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    LIFTOFF_REQUIRE_CUDA();
    previous_ = deterministic_algorithms();
    set_deterministic_algorithms(true);  // the same algorithms whichever stream runs them
  }
  void TearDown() override { set_deterministic_algorithms(previous_); }
  bool previous_ = false;
};

TEST_P(SideLaneCuda, EagerWeightGradientsMatchOneStream) {
  const std::vector<Tensor> one_stream = eager_grads("off", GetParam());
  const int64_t runs = detail::side_lane_runs();
  const std::vector<Tensor> two_streams = eager_grads("on", GetParam());
  EXPECT_EQ(detail::side_lane_runs() - runs, 4) << "every convolution's weight gradient on the lane";
  EXPECT_TRUE(same_bits(one_stream, two_streams));
  const int64_t before_auto = detail::side_lane_runs();
  EXPECT_TRUE(same_bits(one_stream, eager_grads("auto", GetParam())));
  EXPECT_EQ(detail::side_lane_runs(), before_auto) << "auto keeps eager backward passes on one stream";
}

TEST_P(SideLaneCuda, CapturedWeightGradientsMatchOneStream) {
  const std::vector<Tensor> one_stream = eager_grads("off", GetParam());
  config::ScopedSetting lane(config::Knob::wgrad_lane, std::string("auto"));
  const Device cuda = Device::cuda(0);
  AutocastGuard autocast(GetParam());
  Net net;
  net.loss().backward();  // warm-up: algorithm searches and workspaces happen outside the capture
  net.clear_grads();
  prepare_side_lane(cuda);
  const int64_t runs = detail::side_lane_runs();
  CudaGraph graph(cuda);
  graph.begin_capture();
  net.loss().backward();
  graph.end_capture();
  EXPECT_EQ(detail::side_lane_runs() - runs, 4);
  for (int replay = 0; replay < 2; ++replay) {
    graph.replay();
    EXPECT_TRUE(same_bits(one_stream, net.grads())) << "replay " << replay;
  }
}

TEST_P(SideLaneCuda, AGradientHookKeepsOneStream) {
  config::ScopedSetting lane(config::Knob::wgrad_lane, std::string("on"));
  AutocastGuard autocast(GetParam());
  Net net;
  int calls = 0;
  net.leaves[1].add_grad_ready_hook([&calls](const Tensor&) { ++calls; });
  const int64_t runs = detail::side_lane_runs();
  net.loss().backward();
  EXPECT_EQ(detail::side_lane_runs(), runs);
  EXPECT_EQ(calls, 1);
}

INSTANTIATE_TEST_SUITE_P(Precisions, SideLaneCuda, ::testing::Values(DType::f32, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

#else
TEST(SideLaneCuda, NeedsCuda) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif

}  // namespace
}  // namespace liftoff
