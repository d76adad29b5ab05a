// ResNet-20 against PyTorch: tools/reference/golden_resnet20.py wrote the initial state, a batch, and the
// logits, loss, gradients and running statistics of one training-mode forward/backward in torch 1.13 (f32).
// Tolerances, as max |ours - torch| / max |torch| over each tensor:
//   logits, loss: 1e-4;  parameter gradients: 1e-3;  running_mean / running_var after the forward: 1e-4;
//   num_batches_tracked: exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "models/nn/zoo.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "tests/models/nn/golden_file.h"

namespace liftoff {
namespace {

constexpr double kLogitsTol = 1e-4;
constexpr double kLossTol = 1e-4;
constexpr double kGradTol = 1e-3;
constexpr double kRunningStatTol = 1e-4;

using testing::read_golden;
using testing::relative_error;

std::string golden_path() {
  return testing::golden_path("golden_resnet20.bin");
}

class GoldenResNet20 : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [name, t] : read_golden(golden_path())) {
      golden_[name] = t;
      if (name.rfind("param.", 0) == 0) ordered_.emplace_back(name.substr(6), t);
      if (name.rfind("buffer.", 0) == 0) ordered_.emplace_back(name.substr(7), t);
    }
    for (const char* key : {"input", "labels", "logits", "loss"}) ASSERT_TRUE(golden_.count(key)) << key;
  }

  // The state before the forward, in the file's (PyTorch's state_dict) order, prefixes stripped.
  const StateDict& initial_state() const { return ordered_; }

  std::map<std::string, Tensor> golden_;
  StateDict ordered_;
};

TEST_F(GoldenResNet20, StateDictNamesAndOrderMatchPyTorch) {
  const auto model = make_model("resnet20", 1, 10, 28, 0);
  const StateDict ours = model->state_dict();
  ASSERT_EQ(ours.size(), ordered_.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].first, ordered_[i].first);
    EXPECT_EQ(ours[i].second.shape(), ordered_[i].second.shape()) << ours[i].first;
    EXPECT_EQ(ours[i].second.dtype(), ordered_[i].second.dtype()) << ours[i].first;
  }
  for (const auto& [name, t] : model->named_parameters()) EXPECT_TRUE(golden_.count("param." + name)) << name;
  for (const auto& [name, t] : model->named_buffers()) EXPECT_TRUE(golden_.count("buffer." + name)) << name;
}

TEST_F(GoldenResNet20, TrainingStepMatchesPyTorch) {
  const auto model = make_model("resnet20", 1, 10, 28, 42);
  model->load_state_dict(initial_state());
  model->train();
  const Tensor logits = model->forward(golden_.at("input"));
  const Tensor loss = cross_entropy(logits, golden_.at("labels"), 0.1);
  loss.backward();

  const double logits_err = relative_error(logits, golden_.at("logits"));
  const double loss_err = relative_error(loss, golden_.at("loss"));
  EXPECT_LE(logits_err, kLogitsTol);
  EXPECT_LE(loss_err, kLossTol);

  double worst_grad = 0;
  std::string worst_grad_name;
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const double err = relative_error(p.grad(), golden_.at("grad." + name));
    EXPECT_LE(err, kGradTol) << "grad." << name;
    if (err > worst_grad) worst_grad = err, worst_grad_name = name;
  }
  double worst_stat = 0;
  for (const auto& [name, b] : model->named_buffers()) {
    const Tensor& expected = golden_.at("after." + name);
    if (b.dtype() == DType::i64) {
      EXPECT_EQ(b.to_vector<int64_t>(), expected.to_vector<int64_t>()) << name;
      continue;
    }
    const double err = relative_error(b, expected);
    EXPECT_LE(err, kRunningStatTol) << "after." << name;
    worst_stat = std::max(worst_stat, err);
  }
  std::cout << "[golden] max relative error: logits " << logits_err << ", loss " << loss_err << ", gradients "
            << worst_grad << " (" << worst_grad_name << "), running stats " << worst_stat << "\n";
}

TEST_F(GoldenResNet20, ReloadingGivesBitIdenticalLogits) {
  std::vector<float> first;
  for (uint64_t seed : {1u, 2u}) {
    const auto model = make_model("resnet20", 1, 10, 28, seed);
    model->load_state_dict(initial_state());
    model->train();
    const std::vector<float> logits = model->forward(golden_.at("input")).to_vector<float>();
    if (first.empty()) {
      first = logits;
    } else {
      EXPECT_EQ(logits, first);
    }
  }
}

}  // namespace
}  // namespace liftoff
