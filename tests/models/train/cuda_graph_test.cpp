// CUDA graphs where no GPU is needed: the mode flag, the CPU fallback with its reason, and the capture guard.
#include <gtest/gtest.h>

#include <thread>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/layers.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"
#include "ops/optimizer_step/optimizer_step.h"
#include "runtime/graph.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(GraphMode, ParsesTheThreeModesAndRejectsOthers) {
  EXPECT_EQ(parse_graph_mode("auto"), GraphMode::automatic);
  EXPECT_EQ(parse_graph_mode("on"), GraphMode::on);
  EXPECT_EQ(parse_graph_mode("off"), GraphMode::off);
  EXPECT_STREQ(graph_mode_name(GraphMode::automatic), "auto");
  EXPECT_THROW(parse_graph_mode("yes"), ValueError);
}

struct CpuRun {
  Generator gen{5};
  Sequential model{std::make_shared<Flatten>(), std::make_shared<Linear>(64, 10, true, gen)};
  InOrderBatches batches;
  SGD sgd;
  explicit CpuRun()
      : batches(make_synthetic_dataset(32, 1, 8, 8, 10, 3),
                [] {
                  InOrderOptions o;
                  o.batch = 8;
                  o.augment = false;
                  return o;
                }()),
        sgd(model.parameters(), 0.1) {}
};

TEST(GraphMode, AutoOnTheCpuRunsEagerlyAndSaysWhy) {
  CpuRun run;
  TrainerOptions options;
  options.cuda_graphs = GraphMode::automatic;
  options.graph_warmup_steps = 1;
  Trainer trainer(run.model, run.sgd, nullptr, options);
  EXPECT_EQ(trainer.train_epoch(run.batches, 0).steps, 4);
  const GraphStatus& s = trainer.graph_status();
  EXPECT_FALSE(s.used);
  EXPECT_EQ(s.eager_steps, 4);
  EXPECT_EQ(s.graph_steps, 0);
  EXPECT_NE(s.reason.find("--device cuda"), std::string::npos) << s.reason;
}

TEST(GraphMode, OnWithoutCudaIsAClearError) {
  CpuRun run;
  TrainerOptions options;
  options.cuda_graphs = GraphMode::on;
  Trainer trainer(run.model, run.sgd, nullptr, options);
  try {
    trainer.train_epoch(run.batches, 0);
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--cuda-graphs on"), std::string::npos) << e.what();
  }
}

// Capture is the library's default (auto: it falls back to eager with the reason, here the CPU).
TEST(GraphMode, AutoIsTheLibraryDefault) {
  EXPECT_EQ(TrainerOptions{}.cuda_graphs, GraphMode::automatic);
  CpuRun run;
  Trainer trainer(run.model, run.sgd, nullptr, TrainerOptions{});
  EXPECT_EQ(trainer.train_epoch(run.batches, 0).steps, 4);
  EXPECT_EQ(trainer.graph_status().mode, GraphMode::automatic);
  EXPECT_FALSE(trainer.graph_status().used);
  EXPECT_NE(trainer.graph_status().reason.find("--device cuda"), std::string::npos)
      << trainer.graph_status().reason;
}

TEST(GraphMode, OffSaysSo) {
  CpuRun run;
  TrainerOptions options;
  options.cuda_graphs = GraphMode::off;
  Trainer trainer(run.model, run.sgd, nullptr, options);
  trainer.train_epoch(run.batches, 0);
  EXPECT_EQ(trainer.graph_status().mode, GraphMode::off);
  EXPECT_EQ(trainer.graph_status().reason, "--cuda-graphs off");
}

TEST(GraphCapture, GuardIsQuietOutsideACapture) {
  EXPECT_FALSE(graph_capture_active());
  EXPECT_NO_THROW(check_not_capturing("anything"));
  Generator gen(1);
  EXPECT_EQ(gen.next_offset(), 0u);
}

TEST(GraphCapture, WarmupScopeNestsPerThread) {
  EXPECT_FALSE(graph_warmup_active());
  {
    const GraphWarmupScope outer(true);
    EXPECT_TRUE(graph_warmup_active());
    {
      const GraphWarmupScope inner(false);  // leaves the state as it is
      EXPECT_TRUE(graph_warmup_active());
    }
    bool other_thread = true;
    std::thread([&] { other_thread = graph_warmup_active(); }).join();
    EXPECT_FALSE(other_thread);
  }
  EXPECT_FALSE(graph_warmup_active());
}

TEST(GraphCapture, CpuDeviceIsRejected) {
  EXPECT_THROW(CudaGraph{Device::cpu()}, DeviceError);
}

TEST(GraphCapture, OptimizersSayWhyTheyCannotBeCapturedOnTheCpu) {
  Generator gen(2);
  Linear layer(4, 2, true, gen);
  AdamW adamw(layer.parameters());
  std::string why;
  EXPECT_FALSE(adamw.prepare_for_graph_capture(&why));  // its step counts are capturable on CUDA
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  SGD sgd(layer.parameters(), 0.1);
  EXPECT_FALSE(sgd.prepare_for_graph_capture(&why));  // parameters on the CPU
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
}

TEST(SgdLrTensor, ReadsTheRateFromTheTensorInsteadOfTheHyperparameter) {
  for (bool use_tensor : {false, true}) {
    const Tensor p = Tensor::from_vector<float>({1.0f, -2.0f, 3.0f}, {3});
    const Tensor g = Tensor::from_vector<float>({0.5f, 0.25f, -1.0f}, {3});
    SgdHyper hyper;
    hyper.lr = use_tensor ? 99.0 : 0.1;  // ignored when the tensor is given
    if (use_tensor) hyper.lr_tensor = Tensor::full({1}, 0.1, DType::f32);
    sgd_step({p}, {g}, {}, hyper);
    const std::vector<float> got = p.to_vector<float>();
    EXPECT_FLOAT_EQ(got[0], 1.0f - 0.1f * 0.5f);
    EXPECT_FLOAT_EQ(got[2], 3.0f + 0.1f);
  }
  SgdHyper bad;
  bad.lr_tensor = Tensor::full({2}, 0.1, DType::f32);
  const Tensor p = Tensor::zeros({3});
  EXPECT_THROW(sgd_step({p}, {p}, {}, bad), DTypeError);
}

}  // namespace
}  // namespace liftoff
