// ModelEma (models/train/ema.h) and the Trainer's use of it: the recurrence after each step, evaluation with
// the averaged weights (the model's own back afterwards), flip and shift averaging at evaluation, checkpoint
// pieces.
#include "models/train/ema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/layers.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"
#include "ops/binary/binary.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/flip/flip.h"
#include "ops/scale/scale.h"
#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// conv -> batch norm -> relu -> flatten -> linear: parameters, float buffers and an integer buffer.
std::unique_ptr<Sequential> make_net() {
  Generator gen(7);
  return std::make_unique<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(1, 4, 3, 1, 1, false, gen), std::make_shared<BatchNorm2d>(4),
      std::make_shared<ReLU>(), std::make_shared<Flatten>(),
      std::make_shared<Linear>(4 * 8 * 8, 10, true, gen)});
}

InOrderBatches batches_of(int64_t n, int64_t batch, uint64_t seed) {
  InOrderOptions o;
  o.batch = batch;
  o.shuffle = false;
  o.augment = false;
  return InOrderBatches(make_synthetic_dataset(n, 1, 8, 8, 10, seed), o);
}

std::vector<std::vector<float>> values(const std::vector<Tensor>& list) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : list) out.push_back(t.to_vector<float>());
  return out;
}

TEST(ModelEma, StartsAsACopyAndFollowsTheRecurrence) {
  auto net = make_net();
  ModelEma ema(*net, {0.9, false});
  ASSERT_EQ(ema.named_averages().size(), net->named_parameters().size());  // no buffers by default
  const std::vector<Tensor> params = net->parameters();
  std::vector<std::vector<float>> expected = values(params);
  for (int step = 0; step < 3; ++step) {
    for (const Tensor& p : params) p.copy_(add(p.detach(), 0.25 * (step + 1)));  // any change of the weights
    ema.update();
    const std::vector<std::vector<float>> now = values(params);
    for (size_t i = 0; i < expected.size(); ++i) {
      for (size_t k = 0; k < expected[i].size(); ++k)
        expected[i][k] = 0.9f * expected[i][k] + 0.1f * now[i][k];
    }
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const Tensor want = Tensor::from_vector<float>(expected[i], params[i].shape());
    EXPECT_TRUE(testing::all_close(ema.named_averages()[i].second, want, 1e-6, 1e-6)) << "parameter " << i;
    EXPECT_FALSE(testing::all_close(params[i], want, 1e-3, 0)) << "the average must lag the weights";
  }
}

// Module::to(MemoryFormat) after the EMA was made: the EMA averages the live (re-laid-out) weights, its
// averages take their layout, and the values follow the same recurrence as with the model's own layout.
TEST(ModelEma, FollowsAWeightLayoutChangedAfterIt) {
  const auto make = [] {
    Generator gen(5);  // three input channels: the weight's layouts differ in memory
    return std::make_unique<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
        std::make_shared<Conv2d>(3, 4, 3, 1, 1, false, gen), std::make_shared<BatchNorm2d>(4)});
  };
  auto reference = make();
  auto net = make();
  ModelEma ema_reference(*reference, {0.9, false});
  ModelEma ema(*net, {0.9, false});
  net->to(MemoryFormat::channels_last);
  const std::vector<Tensor> params = net->parameters(), reference_params = reference->parameters();
  ASSERT_TRUE(params[0].is_channels_last());
  for (int step = 0; step < 2; ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      reference_params[i].copy_(add(reference_params[i].detach(), 0.5 * (step + 1)));
      params[i].copy_(add(params[i].detach(), 0.5 * (step + 1)));
    }
    ema_reference.update();
    ema.update();
  }
  EXPECT_TRUE(ema.named_averages()[0].second.is_channels_last());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(
        testing::all_close(ema.named_averages()[i].second, ema_reference.named_averages()[i].second, 0, 0))
        << "parameter " << i;
  }
  ema.swap_with_model();
  EXPECT_TRUE(testing::all_close(params[0], ema_reference.named_averages()[0].second, 0, 0));
}

TEST(ModelEma, AveragesFloatBuffersOnlyWhenAsked) {
  auto net = make_net();
  ModelEma copy(*net, {0.5, false});
  ModelEma average(*net, {0.5, true});
  // + running_mean, running_var (not num_batches_tracked: an integer).
  EXPECT_EQ(average.named_averages().size(), copy.named_averages().size() + 2);
  bool has_mean = false;
  for (const auto& [name, t] : average.named_averages()) {
    EXPECT_EQ(name.find("num_batches_tracked"), std::string::npos);
    EXPECT_TRUE(t.dtype() == DType::f32) << name;
    has_mean = has_mean || name == "1.running_mean";
  }
  EXPECT_TRUE(has_mean);
  EXPECT_THROW(ModelEma(*net, {1.0, false}), ValueError);
  EXPECT_THROW(ModelEma(*net, {-0.5, false}), ValueError);
}

TEST(ModelEma, SwapPutsTheAveragesInTheModelAndBack) {
  auto net = make_net();
  ModelEma ema(*net, {0.0, false});
  const std::vector<Tensor> params = net->parameters();
  const auto before = values(params);
  for (const Tensor& p : params) p.copy_(scale(p.detach(), 3.0));
  const auto tripled = values(params);
  ema.swap_with_model();
  EXPECT_EQ(values(params), before);  // the average (= the start) is in the model now
  ema.swap_with_model();
  EXPECT_EQ(values(params), tripled);
}

// The Trainer updates the average after every optimizer step, from the weights that step produced.
TEST(ModelEma, TrainerUpdatesAfterEveryStep) {
  auto net = make_net();
  SGD sgd(net->parameters(), 0.1, 0.9, 0.0, false);
  ModelEma ema(*net, {0.8, true});
  TrainerOptions options;
  options.ema = &ema;
  Trainer trainer(*net, sgd, nullptr, options);
  InOrderBatches train = batches_of(48, 16, 3);
  // The recurrence by hand from what each step left in the model.
  std::vector<std::vector<float>> expected;
  std::vector<Tensor> averaged;
  for (const auto& [name, t] : ema.named_averages()) {
    expected.push_back(t.to_vector<float>());
    averaged.push_back(t);
  }
  std::vector<Tensor> tracked = net->parameters();
  for (const auto& [name, b] : net->named_buffers()) {
    if (b.dtype() == DType::f32) tracked.push_back(b);
  }
  ASSERT_EQ(tracked.size(), expected.size());
  int steps = 0;
  trainer.train_epoch(train, 0, [&](const StepProgress&) {
    ++steps;
    for (size_t i = 0; i < tracked.size(); ++i) {
      const std::vector<float> w = tracked[i].to_vector<float>();
      for (size_t k = 0; k < w.size(); ++k) expected[i][k] = 0.8f * expected[i][k] + 0.2f * w[k];
    }
  });
  ASSERT_EQ(steps, 3);
  for (size_t i = 0; i < expected.size(); ++i) {
    const Tensor want = Tensor::from_vector<float>(expected[i], averaged[i].shape());
    EXPECT_TRUE(testing::all_close(averaged[i], want, 1e-6, 1e-5)) << ema.named_averages()[i].first;
  }
}

TEST(ModelEma, EvaluationUsesTheAverageAndRestoresTheWeights) {
  auto net = make_net();
  SGD sgd(net->parameters(), 0.2, 0.9, 0.0, false);
  ModelEma ema(*net, {0.5, false});
  TrainerOptions options;
  options.ema = &ema;
  Trainer trainer(*net, sgd, nullptr, options);
  InOrderBatches train = batches_of(64, 16, 3);
  trainer.train_epoch(train, 0);
  InOrderBatches test = batches_of(40, 20, 11);
  const auto weights = values(net->parameters());
  const EvalResult with_ema = trainer.evaluate(test);
  EXPECT_EQ(values(net->parameters()), weights);  // back as they were
  EvalOptions raw;
  raw.use_ema = false;
  const EvalResult without = trainer.evaluate(test, raw);
  EXPECT_NE(with_ema.mean_loss, without.mean_loss);
  // The same figure as evaluating a model that holds the averages itself.
  ema.swap_with_model();
  const EvalResult swapped = trainer.evaluate(test, raw);
  ema.swap_with_model();
  EXPECT_DOUBLE_EQ(swapped.mean_loss, with_ema.mean_loss);
  EXPECT_DOUBLE_EQ(swapped.accuracy, with_ema.accuracy);
}

TEST(EvaluateFlip, AveragesTheLogitsOfImageAndMirror) {
  auto net = make_net();
  SGD sgd(net->parameters(), 0.1);
  Trainer trainer(*net, sgd, nullptr, TrainerOptions{});
  InOrderBatches test = batches_of(30, 10, 5);
  EvalOptions flip_options;
  flip_options.hflip = true;
  const EvalResult flipped = trainer.evaluate(test, flip_options);
  const EvalResult plain = trainer.evaluate(test);
  // By hand: the mean cross-entropy of (f(x) + f(mirror x)) / 2.
  NoGradGuard no_grad;
  net->eval();
  double loss_sum = 0.0;
  int64_t n = 0;
  Batch b;
  test.start_epoch(0);
  while (test.next(b)) {
    const Tensor logits = scale(add(net->forward(b.input), net->forward(flip(b.input, {3}))), 0.5);
    loss_sum += cross_entropy(logits, b.labels).item() * static_cast<double>(b.labels.size(0));
    n += b.labels.size(0);
  }
  net->train();
  EXPECT_EQ(flipped.images, 30);
  EXPECT_NEAR(flipped.mean_loss, loss_sum / static_cast<double>(n), 1e-6);
  EXPECT_NE(flipped.mean_loss, plain.mean_loss);  // the mirror really changed something
}

// x [N, C, H, W] moved by (dy, dx) pixels, the nearest edge pixel copied into what opens; by index on the
// host.
Tensor shifted_by_hand(const Tensor& x, int dy, int dx) {
  const std::vector<float> in = x.to_vector<float>();
  std::vector<float> out(in.size());
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < w; ++j) {
        const int64_t si = std::clamp<int64_t>(i - dy, 0, h - 1), sj = std::clamp<int64_t>(j - dx, 0, w - 1);
        out[static_cast<size_t>((p * h + i) * w + j)] = in[static_cast<size_t>((p * h + si) * w + sj)];
      }
    }
  }
  return Tensor::from_vector<float>(out, x.shape());
}

TEST(EvaluateShift, WeighsTheCentredViewHalfAndEachOnePixelShiftQuarter) {
  auto net = make_net();
  SGD sgd(net->parameters(), 0.1);
  Trainer trainer(*net, sgd, nullptr, TrainerOptions{});
  InOrderBatches test = batches_of(30, 10, 5);
  EvalOptions options;
  options.hflip = true;
  options.shift = true;
  const EvalResult shifted = trainer.evaluate(test, options);
  EvalOptions flip_only;
  flip_only.hflip = true;
  const EvalResult flipped = trainer.evaluate(test, flip_only);
  NoGradGuard no_grad;
  net->eval();
  const auto mirrored_mean = [&](const Tensor& x) {
    return scale(add(net->forward(x), net->forward(flip(x, {3}))), 0.5);
  };
  double loss_sum = 0.0;
  Batch b;
  test.start_epoch(0);
  while (test.next(b)) {
    const Tensor logits =
        add(scale(mirrored_mean(b.input), 0.5), scale(add(mirrored_mean(shifted_by_hand(b.input, 1, 1)),
                                                          mirrored_mean(shifted_by_hand(b.input, -1, -1))),
                                                      0.25));
    loss_sum += cross_entropy(logits, b.labels).item() * static_cast<double>(b.labels.size(0));
  }
  net->train();
  EXPECT_EQ(shifted.images, 30);
  EXPECT_NEAR(shifted.mean_loss, loss_sum / 30.0, 1e-6);
  EXPECT_NE(shifted.mean_loss, flipped.mean_loss);  // the shifted views really changed something
}

TEST(EmaCheckpoint, RoundTripsAndRefusesWhatDoesNotFit) {
  auto net = make_net();
  ModelEma ema(*net, {0.9, true});
  for (const auto& [name, t] : ema.named_averages()) t.copy_(add(t.detach(), 1.5));
  CheckpointState state;
  state.path = "ckpt.safetensors";
  EXPECT_FALSE(holds_ema(state));
  capture_ema(ema, state);
  ASSERT_EQ(state.extra.size(), ema.named_averages().size());
  EXPECT_TRUE(holds_ema(state));
  EXPECT_TRUE(holds_buffer_averages(state, *net));  // made with average_buffers
  CheckpointState weights_only;
  capture_ema(ModelEma(*net, {0.9, false}), weights_only);
  EXPECT_TRUE(holds_ema(weights_only));
  EXPECT_FALSE(holds_buffer_averages(weights_only, *net));
  EXPECT_EQ(state.extra.front().first, "ema." + ema.named_averages().front().first);

  auto other_net = make_net();
  ModelEma restored(*other_net, {0.9, true});
  restore_ema(state, &restored);
  for (size_t i = 0; i < ema.named_averages().size(); ++i) {
    EXPECT_TRUE(
        testing::all_close(restored.named_averages()[i].second, ema.named_averages()[i].second, 0, 0));
  }
  // A run without --ema refuses a checkpoint that holds an average; one with --ema needs every average.
  EXPECT_THROW(restore_ema(state, nullptr), ValueError);
  ModelEma params_only(*other_net, {0.9, false});
  EXPECT_NO_THROW(restore_ema(state, &params_only));  // its names are a subset
  CheckpointState without;
  without.path = "old.safetensors";
  EXPECT_NO_THROW(restore_ema(without, nullptr));
  try {
    restore_ema(without, &restored);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("old.safetensors' has no EMA average"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace liftoff
