// conv2d's cuDNN plan cache, owned by the device's context (runtime/cuda/context.h device_extension,
// ops/conv2d/cudnn_plans.cpp): one object per extension type and device; one plan per shape (dtype, layout,
// geometry, groups, dilation, determinism, engine setting) shared by the three directions, reused by later
// calls; every planned variant still computes the CPU's values.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/kernels.h"
#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/determinism.h"
#include "runtime/profile/algorithm_search.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

#if LIFTOFF_WITH_CUDA
#include "ops/conv2d/cudnn_plans.h"
#include "runtime/cuda/context.h"
#endif

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA
std::atomic<int> g_made_a{0};
struct ExtensionA : cuda::DeviceExtension {
  ExtensionA() { ++g_made_a; }
  int value = 0;
};
struct ExtensionB : cuda::DeviceExtension {
  int value = 0;
};

struct Conv {
  Shape x, w;
  int64_t stride = 1, padding = 1, dilation = 1, groups = 1;
  DType dtype = DType::f32;
  bool channels_last = false;
};

// Runs conv (forward, then backward to x, w and bias) on cuda:0 and on the CPU, checks the values, and
// returns how many plans cuda:0 gained.
int64_t plans_added(const Conv& c) {
  const Device cuda = Device::cuda(0);
  // Each input keeps its own layout (the default, auto, would run every non-f64 convolution channels-last and
  // so give the NCHW and NHWC cases one plan).
  const config::ScopedSetting layout(config::Knob::conv_layout, "input");
  const int64_t before = cuda::conv_plan_count(0);
  // The CPU sees the values the device sees (rounded to dtype), in f32 NCHW.
  const Tensor x = testing::random_tensor(c.x, 11, -1, 1, DType::f32).to(c.dtype).to(DType::f32);
  const Tensor w = testing::random_tensor(c.w, 12, -0.5, 0.5, DType::f32).to(c.dtype).to(DType::f32);
  const Tensor b = testing::random_tensor({c.w[0]}, 13, -1, 1, DType::f32).to(c.dtype).to(DType::f32);
  Tensor xd = Tensor::empty(c.x, c.dtype, cuda,
                            c.channels_last ? MemoryFormat::channels_last : MemoryFormat::contiguous);
  xd.copy_(x);
  xd.set_requires_grad(true);
  const Tensor wd = w.to(cuda, c.dtype).set_requires_grad(true);
  const Tensor bd = b.to(cuda, c.dtype).set_requires_grad(true);
  const Tensor xr = x.clone().set_requires_grad(true), wr = w.clone().set_requires_grad(true),
               br = b.clone().set_requires_grad(true);
  const Tensor y = conv2d(xd, wd, bd, c.stride, c.padding, c.dilation, c.groups);
  const Tensor yr = conv2d(xr, wr, br, c.stride, c.padding, c.dilation, c.groups);
  EXPECT_EQ(y.is_channels_last(), c.channels_last) << shape_str(y.strides());
  const Tensor gy = testing::random_tensor(yr.shape(), 14, -1, 1, DType::f32).to(c.dtype).to(DType::f32);
  y.backward(gy.to(cuda, c.dtype));
  yr.backward(gy);
  const double tol = c.dtype == DType::f32 ? 1e-2 : 5e-2;  // f32 may run TF32, as PyTorch by default
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f32), yr, tol, tol));
  EXPECT_TRUE(testing::all_close(xd.grad().to(Device::cpu(), DType::f32), xr.grad(), tol, tol));
  EXPECT_TRUE(testing::all_close(wd.grad().to(Device::cpu(), DType::f32), wr.grad(), 2 * tol, tol));
  EXPECT_TRUE(testing::all_close(bd.grad().to(Device::cpu(), DType::f32), br.grad(), 2 * tol, tol));
  return cuda::conv_plan_count(0) - before;
}
#endif

TEST(ConvPlansCuda, DeviceExtensionIsOnePerTypeAndDevice) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  // Asked from many threads at once, the extension is made once and every caller gets that one.
  std::vector<ExtensionA*> seen(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&seen, i] { seen[i] = &cuda::device_extension<ExtensionA>(0); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(g_made_a.load(), 1);
  for (ExtensionA* p : seen) EXPECT_EQ(p, seen[0]);
  seen[0]->value = 7;
  EXPECT_EQ(cuda::device_extension<ExtensionA>(0).value, 7);
  // Another type has its own object.
  ExtensionB& b = cuda::device_extension<ExtensionB>(0);
  EXPECT_NE(static_cast<void*>(&b), static_cast<void*>(seen[0]));
  EXPECT_EQ(b.value, 0);
  // A device that does not exist is an error naming it, not a new slot.
  EXPECT_THROW(cuda::device_extension<ExtensionB>(cuda::device_count()), DeviceError);
#endif
}

TEST(ConvPlansCuda, OnePlanPerShapeSharedByDirectionsAndReused) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  // A shape no other test uses; forward and both backward directions share its plan.
  const Conv base{{3, 5, 11, 9}, {7, 5, 3, 3}};
  EXPECT_EQ(plans_added(base), 1);
  EXPECT_EQ(plans_added(base), 0);  // the second call runs the cached choices
#endif
}

TEST(ConvPlansCuda, EachKeyFieldGetsItsOwnPlan) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  const Conv base{{3, 6, 11, 9}, {6, 6, 3, 3}};
  plans_added(base);
  Conv stride = base;
  stride.stride = 2;
  EXPECT_EQ(plans_added(stride), 1) << "stride";
  Conv dilation = base;
  dilation.dilation = 2;
  dilation.padding = 2;
  EXPECT_EQ(plans_added(dilation), 1) << "dilation";
  Conv groups = base;
  groups.w = {6, 2, 3, 3};
  groups.groups = 3;
  EXPECT_EQ(plans_added(groups), 1) << "groups";
  EXPECT_EQ(plans_added(groups), 0) << "groups, again";
  Conv depthwise = base;
  depthwise.w = {6, 1, 3, 3};
  depthwise.groups = 6;
  EXPECT_EQ(plans_added(depthwise), 1) << "depthwise";
  Conv half = base;
  half.dtype = DType::f16;
  EXPECT_EQ(plans_added(half), 1) << "f16";
  Conv nhwc = half;
  nhwc.channels_last = true;
  EXPECT_EQ(plans_added(nhwc), 1) << "f16 channels-last";
  EXPECT_EQ(plans_added(nhwc), 0) << "f16 channels-last, again";
  Conv grouped_nhwc = groups;
  grouped_nhwc.dtype = DType::bf16;
  grouped_nhwc.channels_last = true;
  EXPECT_EQ(plans_added(grouped_nhwc), 1) << "bf16 channels-last groups";
#endif
}

TEST(ConvPlansCuda, EngineSettingAndDeterminismArePartOfTheKey) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  const Conv base{{2, 4, 10, 10}, {5, 4, 3, 3}};
  plans_added(base);
  const cuda::ConvEngines engines = cuda::conv_engines();
  cuda::set_conv_engines(engines == cuda::ConvEngines::legacy ? cuda::ConvEngines::automatic
                                                              : cuda::ConvEngines::legacy);
  const int64_t other_engines = plans_added(base);
  cuda::set_conv_engines(engines);
  EXPECT_EQ(other_engines, 1);
  const bool deterministic = deterministic_algorithms();
  set_deterministic_algorithms(!deterministic);
  const int64_t flipped = plans_added(base);
  set_deterministic_algorithms(deterministic);
  EXPECT_EQ(flipped, 1);
  EXPECT_EQ(plans_added(base), 0);
#endif
}

// Under QuickTuningScope (an evaluation's last, smaller batch) a new shape takes cuDNN's first guess in each
// direction, computes the CPU's values, and is not searched; its first use outside the scope searches it.
TEST(ConvPlansCuda, QuickTuningGuessesThenSearchesOnLaterUse) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  const Conv odd{{3, 6, 9, 9}, {7, 6, 3, 3}, 1, 1, 1, 1, DType::bf16, true};  // a shape no other test uses
  const AlgorithmSearchTotals before = algorithm_search_totals();
  {
    const QuickTuningScope quick(true);
    EXPECT_EQ(plans_added(odd), 1);
  }
  const AlgorithmSearchTotals guessed = algorithm_search_totals();
  EXPECT_EQ(guessed.searches, before.searches);
  if (guessed.restored > before.restored) {
    GTEST_SKIP() << "this machine's algorithm store already held the shape's choices (restored, not "
                    "guessed): nothing provisional was left to search";
  }
  EXPECT_EQ(plans_added(odd), 0);  // the same plan, its three directions now searched
  const AlgorithmSearchTotals searched = algorithm_search_totals();
  EXPECT_EQ(searched.searches + searched.restored - guessed.searches - guessed.restored, 3);
  EXPECT_EQ(plans_added(odd), 0);
  EXPECT_EQ(algorithm_search_totals().searches, searched.searches);  // the search's choice stays
#endif
}

// The algorithm store keeps choices timed one by one (an eager run) apart from those timed replayed in graphs
// (the warm-up before a capture): a captured run restoring an eager run's choice would get an engine chosen
// for launch costs it does not pay. Host-only: runs in CUDA builds without a GPU too.
TEST(ConvPlansCuda, StoreKeyNamesHowTheChoiceWasTimed) {
#if LIFTOFF_WITH_CUDA
  if (config::get_string(config::Knob::conv_timing).value_or("auto") != "auto") {
    GTEST_SKIP() << "LIFTOFF_CONV_TIMING is set: every choice is timed one way";
  }
  Conv2dShape g{8, 64, 32, 32, 64, 3, 3, 32, 32, 1, 1};
  g.channels_last = true;
  using cuda::conv_graph::Direction;
  const std::string eager = cuda::conv_plans::store_key(DType::f32, g, Direction::backward_filter);
  std::string in_graphs;
  {
    const GraphWarmupScope warm_up(true);
    in_graphs = cuda::conv_plans::store_key(DType::f32, g, Direction::backward_filter);
  }
  EXPECT_NE(eager, in_graphs);
  EXPECT_NE(eager.find("timed-eagerly"), std::string::npos) << eager;
  EXPECT_NE(in_graphs.find("timed-in-graphs"), std::string::npos) << in_graphs;
  EXPECT_EQ(cuda::conv_plans::store_key(DType::f32, g, Direction::backward_filter), eager);
  EXPECT_NE(cuda::conv_plans::store_key(DType::f32, g, Direction::backward_data), eager);
#else
  GTEST_SKIP() << "the algorithm store's keys are made by the CUDA build";
#endif
}

}  // namespace
}  // namespace liftoff
