// Whole-step CUDA graphs against eager steps on the same data: the parameters after training must be
// identical (deterministic cuDNN algorithms), whatever the accumulation, AMP mode or LR schedule.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/layers.h"
#include "models/nn/zoo.h"
#include "models/train/ddp.h"
#include "models/train/optim.h"
#include "models/train/schedule.h"
#include "models/train/trainer.h"
#include "ops/binary/binary.h"
#include "runtime/determinism.h"
#include "runtime/distributed/process_group.h"
#include "runtime/graph.h"
#include "runtime/profile/profiler.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/caching_allocator.h"
#endif

namespace liftoff {
namespace {

struct RunSpec {
  GraphMode graphs = GraphMode::off;
  int64_t batch = 16;
  int64_t accum = 1;
  int64_t samples = 16 * 12;  // 12 micro-batches
  AmpMode amp = AmpMode::off;
  Profiler* profiler = nullptr;
  int64_t epochs = 2;
  int64_t eval_batch = 0;  // > 0: evaluate after every epoch with this batch (new shapes, cuDNN searches)
  bool ddp = false;        // through DistributedDataParallel on a one-rank NCCL group (small buckets)
  BranchMode concurrent = BranchMode::automatic;
};

struct RunOutcome {
  std::vector<Tensor> params;
  std::vector<Tensor> buffers;  // batch-norm running statistics and counters
  GraphStatus status;
  double mean_loss = 0.0;
  double eval_loss = 0.0;
  DDPStats ddp;
  int64_t ddp_buckets = 0;
};

RunOutcome train_resnet(const RunSpec& spec) {
  set_deterministic_algorithms(true);
  const Device cuda = Device::cuda(0);
  auto model = make_model("resnet20", 1, 10, 12, 7);
  model->to(cuda);
  InOrderOptions data;
  data.batch = spec.batch;
  data.shuffle = true;
  data.augment = true;
  data.seed = 3;
  data.device = cuda;
  InOrderBatches batches(make_synthetic_dataset(spec.samples, 1, 12, 12, 10, 11), data);
  SGD sgd(model->parameters(), 0.05, 0.9, 5e-4, true);
  const int64_t steps_per_epoch = (batches.batches_per_epoch() + spec.accum - 1) / spec.accum;
  const auto schedule =
      make_schedule("onecycle", 0.05, spec.epochs * steps_per_epoch);  // the LR changes every step
  std::unique_ptr<distributed::ProcessGroup> group;
  std::unique_ptr<DistributedDataParallel> ddp;
  if (spec.ddp) {
    distributed::ProcessGroupOptions group_options;
    group_options.cuda_device = 0;
    group = distributed::make_process_group(distributed::Backend::nccl, 0, 1, group_options);
    DDPOptions ddp_options;
    ddp_options.bucket_cap_mb = 0.05;  // several buckets launched from the hooks during backward
    ddp_options.first_bucket_cap_mb = 0.01;
    ddp = std::make_unique<DistributedDataParallel>(*model, *group, ddp_options);
  }
  TrainerOptions options;
  options.ddp = ddp.get();
  options.group = group.get();
  options.accum = spec.accum;
  options.amp = spec.amp;
  options.label_smoothing = 0.1;
  options.cuda_graphs = spec.graphs;
  options.graph_warmup_steps = 2;
  options.profiler = spec.profiler;
  options.concurrent_micro_batches = spec.concurrent;
  Trainer trainer(*model, sgd, schedule.get(), options);
  InOrderOptions eval_data;
  eval_data.batch = spec.eval_batch > 0 ? spec.eval_batch : 1;
  eval_data.shuffle = false;
  eval_data.augment = false;
  eval_data.device = cuda;
  InOrderBatches eval_batches(make_synthetic_dataset(96, 1, 12, 12, 10, 5), eval_data);
  RunOutcome out;
  for (int64_t epoch = 0; epoch < spec.epochs; ++epoch) {
    out.mean_loss = trainer.train_epoch(batches, epoch).mean_loss;
    if (spec.eval_batch > 0) out.eval_loss = trainer.evaluate(eval_batches).mean_loss;
  }
  set_deterministic_algorithms(false);
  out.params = model->parameters();
  out.buffers = model->buffers();
  out.status = trainer.graph_status();
  if (ddp) {
    synchronize(cuda);
    out.ddp = ddp->stats();
    out.ddp_buckets = static_cast<int64_t>(ddp->buckets().size());
  }
  return out;
}

void expect_same_parameters(const RunOutcome& a, const RunOutcome& b, double tolerance) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(testing::all_close(a.params[i].to(Device::cpu()), b.params[i].to(Device::cpu()), tolerance,
                                   tolerance))
        << "parameter " << i;
  }
}

void expect_same_buffers(const RunOutcome& a, const RunOutcome& b) {
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    EXPECT_TRUE(testing::all_close(a.buffers[i].to(Device::cpu()), b.buffers[i].to(Device::cpu()), 0.0, 0.0))
        << "buffer " << i;
  }
}

TEST(CudaGraphTraining, ReplayedStepsMatchEagerSteps) {
  LIFTOFF_REQUIRE_CUDA();
  RunSpec spec;
  const RunOutcome eager = train_resnet(spec);
  spec.graphs = GraphMode::on;
  const RunOutcome graphed = train_resnet(spec);
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  EXPECT_EQ(graphed.status.captured_at_step, 2);
  EXPECT_EQ(graphed.status.eager_steps, 2);
  EXPECT_EQ(graphed.status.graph_steps, 22);
  EXPECT_GT(graphed.status.nodes, 100);
  EXPECT_FALSE(eager.status.used);
  expect_same_parameters(eager, graphed, 0.0);
  EXPECT_DOUBLE_EQ(eager.mean_loss, graphed.mean_loss);
}

TEST(CudaGraphTraining, AccumulationWithPartialLastStepMatchesEager) {
  LIFTOFF_REQUIRE_CUDA();
  RunSpec spec;
  spec.accum = 4;
  spec.samples = 16 * 13 + 5;  // 14 micro-batches per epoch, the last one 5 images: a partial eager step
  const RunOutcome eager = train_resnet(spec);
  spec.graphs = GraphMode::on;
  const RunOutcome graphed = train_resnet(spec);
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  // Per epoch: 3 full steps and one of 2 micro-batches (eager); the first two full steps warm up.
  EXPECT_EQ(graphed.status.graph_steps + graphed.status.eager_steps, 8);
  EXPECT_EQ(graphed.status.eager_steps, 2 + 2);
  expect_same_parameters(eager, graphed, 0.0);
}

// The micro-batches of a captured step on concurrent streams: the same sums in the same order, the
// batch-norm running statistics updated in micro-batch order, the bf16 weight casts of the first
// micro-batch waited for by the others. Bit-identical to one stream and to eager steps.
TEST(CudaGraphTraining, ConcurrentMicroBatchesMatchOneStreamAndEager) {
  LIFTOFF_REQUIRE_CUDA();
  for (AmpMode amp : {AmpMode::off, AmpMode::bf16}) {
    RunSpec spec;
    spec.amp = amp;
    spec.accum = 4;
    spec.samples = 16 * 13 + 5;  // a partial last step, eager
    const RunOutcome eager = train_resnet(spec);
    spec.graphs = GraphMode::on;
    spec.concurrent = BranchMode::off;
    const RunOutcome one_stream = train_resnet(spec);
    spec.concurrent = BranchMode::on;
    const RunOutcome concurrent = train_resnet(spec);
    ASSERT_TRUE(concurrent.status.used) << concurrent.status.reason;
    EXPECT_EQ(concurrent.status.streams, 4) << concurrent.status.streams_reason;
    EXPECT_EQ(one_stream.status.streams, 1);
    EXPECT_EQ(one_stream.status.streams_reason, "--concurrent-micro-batches off");
    expect_same_parameters(eager, concurrent, 0.0);
    expect_same_parameters(one_stream, concurrent, 0.0);
    expect_same_buffers(eager, concurrent);
    expect_same_buffers(one_stream, concurrent);
    EXPECT_DOUBLE_EQ(one_stream.mean_loss, concurrent.mean_loss) << amp_mode_name(amp);
  }
}

TEST(CudaGraphTraining, ConcurrentMicroBatchesAreTimedPerMicroBatch) {
  LIFTOFF_REQUIRE_CUDA();
  ProfilerOptions po;
  po.warmup_steps = 3;  // past the capture
  Profiler profiler(po);
  profiler.set_device(Device::cuda(0));
  RunSpec spec;
  spec.graphs = GraphMode::on;
  spec.accum = 4;
  spec.samples = 16 * 16;
  spec.epochs = 3;
  spec.profiler = &profiler;
  const RunOutcome graphed = train_resnet(spec);
  ASSERT_EQ(graphed.status.streams, 4) << graphed.status.streams_reason;
  profiler.finish();
  const ProfileSummary s = profiler.summary();
  EXPECT_EQ(s.device_steps_dropped, 0);
  ASSERT_GT(s.totals.device_steps, 5);
  for (Stage stage : {Stage::forward, Stage::backward}) {
    EXPECT_EQ(s.totals.device_marks[static_cast<size_t>(stage)], 4 * s.totals.device_steps)
        << stage_name(stage);
  }
  EXPECT_EQ(s.totals.device_marks[static_cast<size_t>(Stage::optimizer)], s.totals.device_steps);
  // The micro-batches overlap on the device: their stage times add up to more than the union of the marks.
  const double stage_sum = s.totals.device_ms[static_cast<size_t>(Stage::forward)] +
                           s.totals.device_ms[static_cast<size_t>(Stage::backward)] +
                           s.totals.device_ms[static_cast<size_t>(Stage::optimizer)];
  EXPECT_GT(stage_sum, s.totals.device_busy_ms);
}

TEST(CudaGraphTraining, MixedPrecisionWithLossScalingMatchesEager) {
  LIFTOFF_REQUIRE_CUDA();
  for (AmpMode amp : {AmpMode::fp16, AmpMode::bf16}) {
    RunSpec spec;
    spec.amp = amp;
    spec.accum = 2;
    const RunOutcome eager = train_resnet(spec);
    spec.graphs = GraphMode::on;
    const RunOutcome graphed = train_resnet(spec);
    ASSERT_TRUE(graphed.status.used) << amp_mode_name(amp) << ": " << graphed.status.reason;
    expect_same_parameters(eager, graphed, 0.0);
  }
}

// The capture falls at the start of an epoch, right after an evaluation that cast the bf16 weights (the
// capture must cast them itself) and met new shapes with a larger batch (cuDNN searches that may grow the
// workspace the graph's convolutions use).
TEST(CudaGraphTraining, EvaluationBetweenEpochsLeavesReplaysExact) {
  LIFTOFF_REQUIRE_CUDA();
  RunSpec spec;
  spec.amp = AmpMode::bf16;
  spec.samples = 32;  // two steps per epoch: the warm-up is exactly epoch 1
  spec.epochs = 4;
  spec.eval_batch = 96;
  const RunOutcome eager = train_resnet(spec);
  spec.graphs = GraphMode::on;
  const RunOutcome graphed = train_resnet(spec);
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  EXPECT_EQ(graphed.status.captured_at_step, 2);
  expect_same_parameters(eager, graphed, 0.0);
  EXPECT_DOUBLE_EQ(eager.eval_loss, graphed.eval_loss);
}

TEST(CudaGraphTraining, ReplaysAreTimedStageByStage) {
  LIFTOFF_REQUIRE_CUDA();
  ProfilerOptions po;
  po.warmup_steps = 4;  // past the capture
  Profiler profiler(po);
  profiler.set_device(Device::cuda(0));
  RunSpec spec;
  spec.graphs = GraphMode::on;
  spec.profiler = &profiler;
  const RunOutcome graphed = train_resnet(spec);
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  profiler.finish();
  const ProfileSummary s = profiler.summary();
  EXPECT_EQ(s.device_steps_dropped, 0);
  ASSERT_GT(s.totals.device_steps, 10);
  for (Stage stage : {Stage::forward, Stage::backward, Stage::optimizer}) {
    EXPECT_GT(s.totals.device_ms[static_cast<size_t>(stage)], 0.0) << stage_name(stage);
    EXPECT_EQ(s.totals.device_marks[static_cast<size_t>(stage)], s.totals.device_steps) << stage_name(stage);
  }
}

#define LIFTOFF_REQUIRE_NCCL()                                                                             \
  do {                                                                                                     \
    LIFTOFF_REQUIRE_CUDA();                                                                                \
    if (!distributed::backend_built(distributed::Backend::nccl)) GTEST_SKIP() << "this build has no NCCL"; \
  } while (0)

// DDP's bucket all-reduces (launched from gradient hooks on the comm stream) inside the captured step,
// with accumulation: exactly the eager DDP result (one rank: the average is the value), and the replays
// count as gradient syncs.
TEST(CudaGraphTraining, DataParallelStepWithAllReduceIsCapturedAndMatchesEager) {
  LIFTOFF_REQUIRE_NCCL();
  RunSpec spec;
  spec.ddp = true;
  spec.accum = 2;
  const RunOutcome eager = train_resnet(spec);
  spec.graphs = GraphMode::on;
  ProfilerOptions po;
  po.warmup_steps = 4;
  Profiler profiler(po);
  profiler.set_device(Device::cuda(0));
  spec.profiler = &profiler;
  const RunOutcome graphed = train_resnet(spec);
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  EXPECT_EQ(graphed.status.eager_steps, 2);
  EXPECT_EQ(graphed.status.graph_steps, 10);
  expect_same_parameters(eager, graphed, 0.0);
  EXPECT_DOUBLE_EQ(eager.mean_loss, graphed.mean_loss);
  ASSERT_GT(graphed.ddp_buckets, 2);
  EXPECT_EQ(graphed.ddp.sync_steps, 12);  // once per optimizer step, replays included
  EXPECT_EQ(graphed.ddp.all_reduce_calls, 12 * graphed.ddp_buckets);
  EXPECT_EQ(graphed.ddp.all_reduce_calls, eager.ddp.all_reduce_calls);
  EXPECT_EQ(graphed.ddp.timed_steps, 2);  // the eager warm-up steps; replays are timed by the profiler
  profiler.finish();
  const ProfileSummary s = profiler.summary();
  ASSERT_GT(s.totals.device_steps, 4);
  const auto allreduce = static_cast<size_t>(Stage::allreduce);
  EXPECT_EQ(s.totals.device_marks[allreduce], s.totals.device_steps);
  EXPECT_GT(s.totals.device_ms[allreduce], 0.0);
  EXPECT_LE(s.totals.allreduce_overlapped_ms, s.totals.device_ms[allreduce] + 1e-6);
}

// DDP with accumulation: all micro-batches but the last overlap; the last one's backward then all-reduces
// the complete sums through the hooks.
TEST(CudaGraphTraining, DataParallelAccumulationOverlapsAllButTheLastMicroBatch) {
  LIFTOFF_REQUIRE_NCCL();
  RunSpec spec;
  spec.ddp = true;
  spec.accum = 4;
  spec.samples = 16 * 16;
  spec.epochs = 3;
  const RunOutcome eager = train_resnet(spec);
  spec.graphs = GraphMode::on;
  const RunOutcome graphed = train_resnet(spec);
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  EXPECT_EQ(graphed.status.streams, 3) << graphed.status.streams_reason;
  expect_same_parameters(eager, graphed, 0.0);
  expect_same_buffers(eager, graphed);
  EXPECT_DOUBLE_EQ(eager.mean_loss, graphed.mean_loss);
  EXPECT_EQ(graphed.ddp.sync_steps, eager.ddp.sync_steps);
  EXPECT_EQ(graphed.ddp.all_reduce_calls, eager.ddp.all_reduce_calls);
}

TEST(CudaGraphTraining, DataParallelStepIsCapturedWithoutAProfiler) {
  LIFTOFF_REQUIRE_NCCL();
  RunSpec spec;
  spec.ddp = true;
  const RunOutcome eager = train_resnet(spec);
  spec.graphs = GraphMode::on;
  const RunOutcome graphed = train_resnet(spec);
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  expect_same_parameters(eager, graphed, 0.0);
  EXPECT_EQ(graphed.ddp.sync_steps, eager.ddp.sync_steps);
}

// A module that draws on the host in forward (randn: generated on the CPU, then copied), which a replay
// could not repeat. Dropout draws graph-safely on the device (cuda_graph_random_cuda.cpp).
class HostNoise : public Module {
 public:
  Tensor forward(const Tensor& x) override {
    return add(x, randn(x.shape(), gen_, 0.0, 0.1, x.dtype(), x.device()));
  }
  std::string type_name() const override { return "HostNoise"; }

 private:
  Generator gen_{9};
};

TEST(CudaGraphTraining, HostRandomDrawsFallBackToEagerOrFailWhenGraphsAreRequired) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  for (GraphMode mode : {GraphMode::automatic, GraphMode::on}) {
    Generator gen(1);
    Sequential model({std::make_shared<Flatten>(), std::make_shared<Linear>(64, 32, true, gen),
                      std::make_shared<HostNoise>(), std::make_shared<Linear>(32, 10, true, gen)});
    model.to(cuda);
    InOrderOptions data;
    data.batch = 8;
    data.augment = false;
    data.device = cuda;
    InOrderBatches batches(make_synthetic_dataset(64, 1, 8, 8, 10, 3), data);
    SGD sgd(model.parameters(), 0.1);
    TrainerOptions options;
    options.cuda_graphs = mode;
    options.graph_warmup_steps = 1;
    Trainer trainer(model, sgd, nullptr, options);
    if (mode == GraphMode::on) {
      EXPECT_THROW(trainer.train_epoch(batches, 0), GraphCaptureError);
      continue;
    }
    const EpochResult r = trainer.train_epoch(batches, 0);
    EXPECT_EQ(r.steps, 8);  // every step ran, eagerly after the failed capture
    EXPECT_FALSE(trainer.graph_status().used);
    EXPECT_NE(trainer.graph_status().reason.find("random"), std::string::npos)
        << trainer.graph_status().reason;
    EXPECT_EQ(trainer.graph_status().eager_steps, 8);
  }
}

TEST(CudaGraph, MemoryAllocatedDuringCaptureIsNotHandedOutAfterwards) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor x = Tensor::full({1000}, 2.0, DType::f32, cuda);
  CudaGraph graph(cuda);
  void* captured_ptr = nullptr;
  Tensor out = Tensor::empty({1000}, DType::f32, cuda);
#if LIFTOFF_WITH_CUDA
  const size_t allocated_before = cuda::CachingAllocator::get().stats(0).allocated;
#endif
  graph.begin_capture();
  {
    Tensor scratch = Tensor::empty({1000}, DType::f32, cuda);  // private pool
    captured_ptr = scratch.raw_data();
    scratch.copy_(x);
    accumulate_into(scratch, x);
    out.copy_(scratch);
  }  // freed during the capture: back to the graph's pool, not the shared one
  graph.end_capture();
  EXPECT_GT(graph.num_nodes(), 0u);
#if LIFTOFF_WITH_CUDA
  // The graph's block counts as allocated even with no tensor holding it: every replay writes it.
  EXPECT_GE(cuda::CachingAllocator::get().stats(0).allocated, allocated_before + 4000);
#endif
  for (int i = 0; i < 4; ++i) {
    const Tensor other = Tensor::full({1000}, 7.0, DType::f32, cuda);  // same size class, shared pool
    EXPECT_NE(other.raw_data(), captured_ptr);
  }
  graph.replay();
  graph.replay();
  const std::vector<float> got = out.to_vector<float>();
  EXPECT_EQ(got.front(), 4.0f);
  EXPECT_EQ(got.back(), 4.0f);
  EXPECT_EQ(graph.replays(), 2);
}

TEST(CudaGraph, HostReadInsideCaptureFailsCleanly) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor x = Tensor::full({4}, 1.0, DType::f32, cuda);
  CudaGraph graph(cuda);
  graph.begin_capture();
  EXPECT_TRUE(graph_capture_active());
  EXPECT_THROW(x.to_vector<float>(), GraphCaptureError);
  graph.abort_capture();
  EXPECT_FALSE(graph_capture_active());
  // The stream and the allocator work normally afterwards.
  EXPECT_EQ(x.to_vector<float>()[0], 1.0f);
}

}  // namespace
}  // namespace liftoff
