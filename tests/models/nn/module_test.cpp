#include "models/nn/module.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/zoo.h"
#include "models/train/optim.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/relu/relu.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// A leaf module with one parameter and one buffer.
struct Leaf : Module {
  explicit Leaf(double value) {
    w = register_parameter("w", Tensor::full({2, 3}, value));
    stat = register_buffer("stat", Tensor::full({2}, value + 1));
  }
  Tensor forward(const Tensor& x) override { return relu(x); }
  Tensor w, stat;
};

struct Nested : Module {
  Nested() { inner = register_module("inner", std::make_shared<Leaf>(3.0)); }
  Tensor forward(const Tensor& x) override { return inner->forward(x); }
  std::shared_ptr<Leaf> inner;
};

// A child registered before the module's own tensors: PyTorch still lists own entries first.
struct Tree : Module {
  Tree() {
    a = register_module("a", std::make_shared<Leaf>(1.0));
    alpha = register_parameter("alpha", Tensor::full({1}, 0.5));
    count = register_buffer("count", Tensor::zeros({}, DType::i64));
    b = register_module("b", std::make_shared<Nested>());
  }
  Tensor forward(const Tensor& x) override { return b->forward(a->forward(x)); }
  std::string type_name() const override { return "Tree"; }
  std::shared_ptr<Leaf> a;
  std::shared_ptr<Nested> b;
  Tensor alpha, count;
};

std::vector<std::string> names(const NamedTensors& list) {
  std::vector<std::string> out;
  for (const auto& entry : list) out.push_back(entry.first);
  return out;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Module, NamesAreDottedInRegistrationOrder) {
  Tree tree;
  EXPECT_EQ(names(tree.named_parameters()), (std::vector<std::string>{"alpha", "a.w", "b.inner.w"}));
  EXPECT_EQ(names(tree.named_buffers()), (std::vector<std::string>{"count", "a.stat", "b.inner.stat"}));
  EXPECT_EQ(names(tree.state_dict()),
            (std::vector<std::string>{"alpha", "count", "a.w", "a.stat", "b.inner.w", "b.inner.stat"}));
  EXPECT_EQ(tree.num_parameters(), 1 + 6 + 6);
  const std::vector<Tensor> params = tree.parameters();
  ASSERT_EQ(params.size(), 3u);
  EXPECT_TRUE(params[0].same(tree.alpha));
  EXPECT_TRUE(params[2].same(tree.b->inner->w));
  for (const auto& p : params) EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  for (const auto& b : tree.buffers()) EXPECT_FALSE(b.requires_grad());
}

TEST(Module, ResNetNamesMatchPyTorch) {
  const auto model = make_model("resnet20", 3, 10, 32, 0);
  const std::vector<std::string> params = names(model->named_parameters());
  ASSERT_EQ(params.size(), 65u);  // conv1 + bn1 (3), 9 blocks * 6, 2 projections * 3, fc (2)
  EXPECT_EQ(params[0], "conv1.weight");
  EXPECT_EQ(params[1], "bn1.weight");
  EXPECT_EQ(params[3], "layer1.0.conv1.weight");
  EXPECT_EQ(params.back(), "fc.bias");
  const std::vector<std::string> state = names(model->state_dict());
  EXPECT_EQ(std::vector<std::string>(state.begin(), state.begin() + 6),
            (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                      "bn1.running_var", "bn1.num_batches_tracked"}));
  EXPECT_NE(std::find(state.begin(), state.end(), "layer2.0.shortcut.0.weight"), state.end());
  EXPECT_NE(std::find(state.begin(), state.end(), "layer3.0.shortcut.1.running_var"), state.end());
  EXPECT_EQ(std::find(state.begin(), state.end(), "layer1.0.shortcut.0.weight"), state.end());
}

TEST(Module, RejectsBadNames) {
  struct Bad : Module {
    Tensor forward(const Tensor& x) override { return x; }
    void add(const std::string& name) { register_parameter(name, Tensor::zeros({1})); }
    void add_buffer(const std::string& name) { register_buffer(name, Tensor::zeros({1})); }
  };
  Bad bad;
  bad.add("x");
  EXPECT_THROW(bad.add("x"), ValueError);
  EXPECT_THROW(bad.add_buffer("x"), ValueError);
  EXPECT_THROW(bad.add("a.b"), ValueError);
  EXPECT_THROW(bad.add(""), ValueError);
}

TEST(Module, StateDictRoundTripCopiesValues) {
  const auto source = make_model("resnet20", 1, 10, 28, 1);
  const auto target = make_model("resnet20", 1, 10, 28, 2);
  const StateDict state = source->state_dict();
  EXPECT_NE(state[0].second.to_vector<float>(), target->state_dict()[0].second.to_vector<float>());
  const Tensor target_weight = target->named_parameters()[0].second;
  target->load_state_dict(state);
  const StateDict loaded = target->state_dict();
  ASSERT_EQ(loaded.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(loaded[i].first, state[i].first);
    EXPECT_EQ(loaded[i].second.to_vector<double>(), state[i].second.to_vector<double>()) << state[i].first;
  }
  // Loaded in place into the existing handles, as copies.
  EXPECT_TRUE(target->named_parameters()[0].second.same(target_weight));
  EXPECT_EQ(target_weight.to_vector<float>(), state[0].second.to_vector<float>());
  state[0].second.fill_(7.0);
  EXPECT_NE(target_weight.to_vector<float>()[0], 7.0f);
  // State values share the live storage, and are detached.
  EXPECT_EQ(source->named_parameters()[0].second.to_vector<float>()[0], 7.0f);
  EXPECT_FALSE(state[0].second.requires_grad());
}

TEST(Module, LoadStateDictConvertsDType) {
  Tree tree;
  StateDict state = tree.state_dict();
  for (auto& entry : state) entry.second = Tensor::full(entry.second.shape(), 4.0, DType::f64);
  tree.load_state_dict(state);
  EXPECT_EQ(tree.alpha.dtype(), DType::f32);
  EXPECT_EQ(tree.alpha.to_vector<float>(), std::vector<float>{4.0f});
  EXPECT_EQ(tree.count.dtype(), DType::i64);
  EXPECT_EQ(tree.count.to_vector<int64_t>(), std::vector<int64_t>{4});
}

TEST(Module, LoadStateDictErrorsNameTheKeys) {
  Tree tree;
  StateDict missing = tree.state_dict();
  missing.erase(missing.begin() + 2);  // a.w
  std::string msg = error_of([&] { tree.load_state_dict(missing); });
  EXPECT_NE(msg.find("Missing key(s): \"a.w\""), std::string::npos) << msg;
  EXPECT_THROW(tree.load_state_dict(missing), ValueError);

  StateDict unexpected = tree.state_dict();
  unexpected.emplace_back("a.extra", Tensor::zeros({1}));
  msg = error_of([&] { tree.load_state_dict(unexpected); });
  EXPECT_NE(msg.find("Unexpected key(s): \"a.extra\""), std::string::npos) << msg;

  StateDict wrong_shape = tree.state_dict();
  wrong_shape[2].second = Tensor::zeros({3, 2});
  msg = error_of([&] { tree.load_state_dict(wrong_shape); });
  EXPECT_NE(msg.find("\"a.w\": checkpoint has [3, 2], the model has [2, 3]"), std::string::npos) << msg;
  EXPECT_THROW(tree.load_state_dict(wrong_shape), ShapeError);
  // A shape mismatch fails even when not strict, and nothing was copied by the failed loads.
  EXPECT_THROW(tree.load_state_dict(wrong_shape, /*strict=*/false), ShapeError);
  wrong_shape[0].second = Tensor::full({1}, 9.0);
  EXPECT_THROW(tree.load_state_dict(wrong_shape), ShapeError);
  EXPECT_EQ(tree.alpha.to_vector<float>(), std::vector<float>{0.5f});

  StateDict duplicate = tree.state_dict();
  duplicate.push_back(duplicate[0]);
  EXPECT_THROW(tree.load_state_dict(duplicate), ValueError);
}

TEST(Module, NonStrictLoadsThePresentKeys) {
  Tree tree;
  StateDict partial = {{"alpha", Tensor::full({1}, 2.0)}, {"not.there", Tensor::zeros({5})}};
  tree.load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(tree.alpha.to_vector<float>(), std::vector<float>{2.0f});
  EXPECT_EQ(tree.a->w.to_vector<float>(), std::vector<float>(6, 1.0f));
}

TEST(Module, TrainEvalIsRecursive) {
  Tree tree;
  EXPECT_TRUE(tree.is_training());
  tree.eval();
  EXPECT_FALSE(tree.is_training());
  EXPECT_FALSE(tree.a->is_training());
  EXPECT_FALSE(tree.b->inner->is_training());
  tree.train();
  EXPECT_TRUE(tree.b->inner->is_training());
}

TEST(Module, ToCpuIsANoOp) {
  Tree tree;
  const void* before = tree.alpha.raw_data();
  tree.to(Device::cpu());
  EXPECT_EQ(tree.alpha.raw_data(), before);
  EXPECT_TRUE(tree.parameters()[0].same(tree.alpha));
}

TEST(Module, ToDTypeConvertsInPlaceKeepingHandles) {
  Tree tree;
  const Tensor w = tree.a->w;
  w.set_grad(Tensor::ones({2, 3}));
  tree.to(DType::f64);
  EXPECT_EQ(w.dtype(), DType::f64);
  EXPECT_EQ(w.grad().dtype(), DType::f64);
  EXPECT_TRUE(w.requires_grad() && w.is_leaf());
  EXPECT_EQ(w.to_vector<double>(), std::vector<double>(6, 1.0));
  EXPECT_EQ(tree.a->stat.dtype(), DType::f64);
  EXPECT_EQ(tree.count.dtype(), DType::i64);  // integer buffers keep their dtype
  EXPECT_THROW(tree.to(DType::i32), DTypeError);
}

// PyTorch's module.to(memory_format=channels_last): 4-D weights (and their gradients) re-laid out in place,
// values, handles and the other parameters unchanged; the model computes what it computed before.
TEST(Module, ToChannelsLastRelaysFourDimensionalWeightsInPlace) {
  const auto model = make_model("resnet20", 3, 10, 8, 3);
  const Tensor x = testing::random_tensor({2, 3, 8, 8}, 5, -1, 1, DType::f32);
  const Tensor expected = model->forward(x);
  const Tensor w = model->named_parameters()[0].second;
  ASSERT_EQ(w.dim(), 4);
  w.set_grad(testing::random_tensor(w.shape(), 6, -1, 1, DType::f32));
  const std::vector<float> values = w.to_vector<float>(), grad = w.grad().to_vector<float>();
  model->to(MemoryFormat::channels_last);
  EXPECT_TRUE(w.is_channels_last());
  EXPECT_TRUE(w.grad().is_channels_last());
  EXPECT_TRUE(model->named_parameters()[0].second.same(w));
  EXPECT_TRUE(w.requires_grad() && w.is_leaf());
  EXPECT_EQ(w.to_vector<float>(), values);
  EXPECT_EQ(w.grad().to_vector<float>(), grad);
  for (const auto& [name, t] : model->state_dict()) {
    EXPECT_TRUE(t.dim() == 4 ? t.is_channels_last() : t.is_contiguous()) << name;
  }
  EXPECT_TRUE(testing::all_close(model->forward(x), expected, 0, 0));
  model->to(MemoryFormat::contiguous);
  EXPECT_TRUE(w.is_contiguous());
  EXPECT_EQ(w.to_vector<float>(), values);
  EXPECT_THROW(set_memory_format_in_place(Tensor::zeros({2, 3}), MemoryFormat::channels_last), ShapeError);
}

TEST(Module, ZeroGradSetsToNone) {
  Tree tree;
  relu(tree.a->w).backward(Tensor::ones({2, 3}));
  tree.alpha.set_grad(Tensor::ones({1}));
  ASSERT_TRUE(tree.a->w.grad().defined());
  tree.zero_grad();
  for (const auto& p : tree.parameters()) EXPECT_FALSE(p.grad().defined());
}

// The move keeps every handle (the optimizer's too): train on the GPU, compare with the CPU.
TEST(Module, ToCudaMovesInPlace) {
  LIFTOFF_REQUIRE_CUDA();
  const auto model = make_model("resnet20", 1, 10, 28, 3);
  const auto reference = make_model("resnet20", 1, 10, 28, 3);
  const Tensor x = testing::random_tensor({4, 1, 28, 28}, 5, -1, 1, DType::f32);
  const Tensor labels = Tensor::from_vector<int64_t>({1, 0, 9, 4}, {4});
  const Tensor expected = reference->forward(x);

  const Tensor w = model->named_parameters()[0].second;
  model->to(Device::cuda());
  EXPECT_TRUE(w.is_cuda());
  EXPECT_TRUE(model->named_parameters()[0].second.same(w));
  for (const auto& [name, t] : model->state_dict()) EXPECT_TRUE(t.is_cuda()) << name;
  EXPECT_TRUE(w.requires_grad() && w.is_leaf());

  SGD opt(model->parameters(), 0.1, 0.9);
  const Tensor logits = model->forward(x.to(Device::cuda()));
  EXPECT_TRUE(testing::all_close(logits.to(Device::cpu()), expected, 1e-3, 1e-2));  // cuDNN may use TF32
  cross_entropy(logits, labels.to(Device::cuda())).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().is_cuda());
  const std::vector<float> before = w.to_vector<float>();
  opt.step();
  EXPECT_NE(w.to_vector<float>(), before);
  EXPECT_EQ(model->named_buffers()[2].second.to_vector<int64_t>(), std::vector<int64_t>{1});

  model->to(Device::cpu());
  EXPECT_TRUE(w.device().is_cpu());
  EXPECT_TRUE(w.grad().device().is_cpu());
}

}  // namespace
}  // namespace liftoff
