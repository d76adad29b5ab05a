// Whole-step CUDA graphs of models with dropout and of AdamW (graph-safe RNG, device step counts): the
// captured run must match the eager run bit for bit (parameters, losses, dropout generator positions, AdamW
// step counts), fp16's skipped steps must not advance the counts, and the zoo's mobilenet_v2 and vit_tiny
// are captured under --cuda-graphs auto.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/layers.h"
#include "models/nn/zoo.h"
#include "models/train/checkpoint.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"
#include "runtime/determinism.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

struct Spec {
  std::string model = "mlp";  // "mlp" (with Dropout) or a make_model name
  std::string optimizer = "adamw";
  GraphMode graphs = GraphMode::off;
  AmpMode amp = AmpMode::off;
  double loss_scale = 0.0;  // fp16: a static scale (huge: every step overflows and is skipped)
  int64_t image = 8;
  int64_t batch = 8;
  int64_t samples = 64;
  int64_t epochs = 2;
};

struct Outcome {
  std::vector<Tensor> params;
  GraphStatus status;
  double mean_loss = 0.0;
  std::vector<uint64_t> dropout_offsets;
  std::vector<int64_t> step_counts;  // AdamW's step.<i>
  int64_t skipped_steps = 0;
  int64_t steps = 0;
  CheckpointState optimizer_state;
};

std::unique_ptr<Module> build(const Spec& spec) {
  if (spec.model != "mlp") return make_model(spec.model, 1, 10, spec.image, 7);
  Generator gen(5);
  const int64_t features = spec.image * spec.image;
  auto model = std::make_unique<Sequential>();
  model->push_back(std::make_shared<Flatten>())
      .push_back(std::make_shared<Linear>(features, 32, true, gen))
      .push_back(std::make_shared<ReLU>())
      .push_back(std::make_shared<Dropout>(0.5, 9))
      .push_back(std::make_shared<Linear>(32, 32, true, gen))
      .push_back(std::make_shared<Dropout>(0.25, 10))
      .push_back(std::make_shared<Linear>(32, 10, true, gen));
  return model;
}

void collect_dropout_offsets(Module& m, std::vector<uint64_t>& out) {
  if (auto* d = dynamic_cast<Dropout*>(&m)) out.push_back(d->generator().offset());
  for (const auto& [name, child] : m.named_children()) collect_dropout_offsets(*child, out);
}

Outcome train(const Spec& spec) {
  set_deterministic_algorithms(true);
  const Device cuda = Device::cuda(0);
  std::unique_ptr<Module> model = build(spec);
  model->to(cuda);
  InOrderOptions data;
  data.batch = spec.batch;
  data.augment = false;
  data.seed = 3;
  data.device = cuda;
  InOrderBatches batches(make_synthetic_dataset(spec.samples, 1, spec.image, spec.image, 10, 11), data);
  std::unique_ptr<Optimizer> opt;
  if (spec.optimizer == "adamw") {
    opt = std::make_unique<AdamW>(model->parameters(), 1e-3, 0.9, 0.999, 1e-8, 0.05);
  } else {
    opt = std::make_unique<SGD>(model->parameters(), 0.05, 0.9, 5e-4, true);
  }
  const int64_t steps = spec.epochs * batches.batches_per_epoch();
  const auto schedule = make_schedule("onecycle", 1e-3, steps);  // the LR changes every step
  TrainerOptions options;
  options.amp = spec.amp;
  options.loss_scale = spec.loss_scale;
  options.cuda_graphs = spec.graphs;
  options.graph_warmup_steps = 2;
  Outcome out;
  {
    Trainer trainer(*model, *opt, schedule.get(), options);
    for (int64_t epoch = 0; epoch < spec.epochs; ++epoch)
      out.mean_loss = trainer.train_epoch(batches, epoch).mean_loss;
    out.status = trainer.graph_status();
    out.steps = trainer.global_step();
    const Tensor& skipped = trainer.scaler().skipped_steps();
    out.skipped_steps = skipped.defined() ? static_cast<int64_t>(skipped.item()) : 0;
  }
  set_deterministic_algorithms(false);
  out.params = model->parameters();
  collect_dropout_offsets(*model, out.dropout_offsets);
  for (const auto& [name, t] : opt->named_state()) {
    if (name.rfind("step.", 0) == 0) out.step_counts.push_back(t.to_vector<int64_t>()[0]);
  }
  capture_optimizer(*opt, out.optimizer_state);
  return out;
}

// tolerance 0: bit for bit.
void expect_same_run(const Outcome& eager, const Outcome& graphed, double tolerance = 0.0) {
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  EXPECT_GT(graphed.status.graph_steps, 0);
  ASSERT_EQ(eager.params.size(), graphed.params.size());
  for (size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(testing::all_close(graphed.params[i].to(Device::cpu()), eager.params[i].to(Device::cpu()),
                                   tolerance, tolerance))
        << "parameter " << i;
  }
  EXPECT_NEAR(graphed.mean_loss, eager.mean_loss, tolerance * (1.0 + std::abs(eager.mean_loss)));
  EXPECT_EQ(graphed.dropout_offsets, eager.dropout_offsets);
  EXPECT_EQ(graphed.step_counts, eager.step_counts);
  EXPECT_EQ(graphed.skipped_steps, eager.skipped_steps);
}

TEST(CudaGraphRandom, DropoutAndAdamWStepsAreCapturedAndMatchEager) {
  LIFTOFF_REQUIRE_CUDA();
  Spec spec;
  const Outcome eager = train(spec);
  spec.graphs = GraphMode::on;
  const Outcome graphed = train(spec);
  expect_same_run(eager, graphed);
  EXPECT_EQ(graphed.status.eager_steps, 2);
  EXPECT_EQ(graphed.status.graph_steps, 14);
  // Every step drew one mask per dropout layer and updated every parameter once.
  EXPECT_EQ(graphed.dropout_offsets, (std::vector<uint64_t>{16, 16}));
  EXPECT_EQ(graphed.step_counts, std::vector<int64_t>(graphed.params.size(), 16));
}

TEST(CudaGraphRandom, Fp16LossScalingMatchesEagerAndSkippedStepsDoNotCount) {
  LIFTOFF_REQUIRE_CUDA();
  Spec spec;
  spec.amp = AmpMode::fp16;
  const Outcome eager = train(spec);
  spec.graphs = GraphMode::on;
  const Outcome graphed = train(spec);
  expect_same_run(eager, graphed);
  EXPECT_EQ(graphed.step_counts,
            std::vector<int64_t>(graphed.params.size(), graphed.steps - graphed.skipped_steps));
  // A static scale so large that every step's gradients overflow: every step skipped, in the graph too.
  spec.loss_scale = 1e30;
  const Outcome all_skipped = train(spec);
  ASSERT_TRUE(all_skipped.status.used) << all_skipped.status.reason;
  EXPECT_EQ(all_skipped.skipped_steps, all_skipped.steps);
  EXPECT_EQ(all_skipped.step_counts, std::vector<int64_t>(all_skipped.params.size(), 0));
}

TEST(CudaGraphRandom, AdamWStepCountsGoThroughACheckpoint) {
  LIFTOFF_REQUIRE_CUDA();
  Spec spec;
  spec.graphs = GraphMode::on;
  const Outcome graphed = train(spec);
  ASSERT_TRUE(graphed.status.used) << graphed.status.reason;
  // The snapshot is on the host, as a checkpoint writes it; a fresh optimizer on the GPU takes it back.
  const std::unique_ptr<Module> model = build(spec);
  model->to(Device::cuda(0));
  AdamW fresh(model->parameters());
  restore_optimizer(graphed.optimizer_state, fresh);
  for (const auto& [name, t] : fresh.named_state()) {
    if (name.rfind("step.", 0) != 0) continue;
    EXPECT_TRUE(t.is_cuda()) << name;
    EXPECT_EQ(t.to_vector<int64_t>(), std::vector<int64_t>{16}) << name;
  }
}

// The two zoo models that ran eagerly before (mobilenet_v2's classifier dropout, vit_tiny's AdamW) are
// captured under auto, and their replays follow eager steps (closely: the point here is the capture; the
// bit-exact comparisons are the small model's above).
TEST(CudaGraphRandom, ZooModelsWithDropoutOrAdamWAreCaptured) {
  LIFTOFF_REQUIRE_CUDA();
  for (const std::string name : {"mobilenet_v2", "vit_tiny"}) {
    Spec spec;
    spec.model = name;
    spec.optimizer = name == "vit_tiny" ? "adamw" : "sgd";
    spec.image = 16;
    spec.batch = 8;
    spec.samples = 48;
    spec.amp = AmpMode::bf16;
    const Outcome eager = train(spec);
    spec.graphs = GraphMode::automatic;
    const Outcome graphed = train(spec);
    EXPECT_TRUE(graphed.status.reason.empty()) << name << ": " << graphed.status.reason;
    expect_same_run(eager, graphed, 1e-4);
  }
}

}  // namespace
}  // namespace liftoff
