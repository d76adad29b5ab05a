#include "models/nn/zoo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "models/train/optim.h"
#include "ops/ops.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Parameter counts of tools/reference/golden_resnet20.py's PyTorch ResNet (projection shortcuts).
TEST(Zoo, ResNetParameterCountsMatchPyTorch) {
  EXPECT_EQ(make_model("resnet20", 3, 10, 32, 0)->num_parameters(), 272474);
  EXPECT_EQ(make_model("resnet20", 1, 10, 28, 0)->num_parameters(), 272186);
  EXPECT_EQ(make_model("resnet32", 3, 10, 32, 0)->num_parameters(), 466906);
  EXPECT_EQ(make_model("resnet44", 3, 10, 32, 0)->num_parameters(), 661338);
  EXPECT_EQ(make_model("resnet56", 3, 10, 32, 0)->num_parameters(), 855770);
}

TEST(Zoo, SimpleCnnParameterCount) {
  // conv1 1*32*9+32, bn1 64, conv2 32*64*9+64, bn2 128, fc1 64*7*7*128+128, fc2 128*10+10.
  EXPECT_EQ(make_model("simple_cnn", 1, 10, 28, 0)->num_parameters(), 320 + 64 + 18496 + 128 + 401536 + 1290);
  // 32x32: 8x8 after pooling.
  EXPECT_EQ(make_model("simple_cnn", 3, 10, 32, 0)->num_parameters(),
            3 * 32 * 9 + 32 + 64 + 18496 + 128 + 64 * 64 * 128 + 128 + 1290);
}

TEST(Zoo, StridedCnnParameterCountAndSizeIndependence) {
  // conv 1*16*9, bn 32; conv 16*32*9, bn 64; conv 32*64*9, bn 128; fc 64*10+10: the same at any image size.
  const int64_t expected = 144 + 32 + 4608 + 64 + 18432 + 128 + 650;
  EXPECT_EQ(make_model("strided_cnn", 1, 10, 28, 0)->num_parameters(), expected);
  EXPECT_EQ(make_model("strided_cnn", 1, 10, 224, 0)->num_parameters(), expected);
  const auto model = make_model("strided_cnn", 3, 5, 64, 2);
  EXPECT_EQ(model->forward(testing::random_tensor({2, 3, 64, 64}, 4, -1, 1, DType::f32)).shape(),
            (Shape{2, 5}));
}

// ResNet-9's parameters, counted from its layer list (8 conv_bn layers: 3x3 convs without bias + batch norm
// weight and bias; fc without bias), and the state-dict names of tools/reference/resnet_cifar.py's ResNet9
// (prep.0 its conv, prep.1 its batch norm, ...), so its weights load either way.
TEST(Zoo, ResNet9ParameterCountAndNames) {
  const std::pair<int64_t, int64_t> convs[] = {{1, 64},    {64, 128},  {128, 128}, {128, 128},
                                               {128, 256}, {256, 512}, {512, 512}, {512, 512}};
  int64_t expected = 512 * 10;
  for (const auto& [in, out] : convs) expected += in * out * 9 + 2 * out;
  const auto model = make_model("resnet9", 1, 10, 28, 0);
  EXPECT_EQ(model->num_parameters(), expected);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model->state_dict()) names.push_back(name);
  // Per conv_bn: the conv weight; the batch norm weight, bias, running mean, var and num_batches_tracked.
  EXPECT_EQ(names.size(), 8u * 6 + 1);
  for (const char* name : {"prep.0.weight", "prep.1.running_mean", "prep.1.num_batches_tracked",
                           "res1b.1.bias", "res3a.0.weight", "fc.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  EXPECT_EQ(std::find(names.begin(), names.end(), "fc.bias"), names.end());
}

TEST(Zoo, ResNet9RefusesImagesItCannotPool) {
  EXPECT_THROW(make_model("resnet9", 1, 10, 7, 0), ValueError);
  const auto model = make_model("resnet9", 1, 10, 28, 0);
  EXPECT_THROW(model->forward(testing::random_tensor({1, 1, 28, 24}, 1, -1, 1, DType::f32)), ShapeError);
}

// The whole network trains: SGD memorises a small batch (every layer's backward, the residual adds, the
// global max pool and the 0.125 output scale in one chain). 8 px keeps it fast on the CPU.
TEST(Zoo, ResNet9MemorisesABatch) {
  const auto model = make_model("resnet9", 1, 10, 8, 3);
  const Tensor x = testing::random_tensor({16, 1, 8, 8}, 7, -1, 1, DType::f32);
  std::vector<int64_t> classes(16);
  for (int64_t i = 0; i < 16; ++i) classes[i] = i % 10;
  const Tensor labels = Tensor::from_vector<int64_t>(classes, {16});
  SGD sgd(model->parameters(), 0.2, 0.9);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    sgd.zero_grad();
    const Tensor loss = cross_entropy(model->forward(x), labels);
    loss.backward();
    sgd.step();
    last = loss.item();
    if (step == 0) first = last;
  }
  EXPECT_NEAR(first, std::log(10.0), 0.3);  // the scaled logits start near uniform
  EXPECT_LT(last, 0.25 * first) << "first loss " << first << ", last " << last;
}

TEST(Zoo, ForwardShapes) {
  for (const std::string& name : model_names()) {
    const auto gray = make_model(name, 1, 10, 28, 1);
    EXPECT_EQ(gray->forward(testing::random_tensor({2, 1, 28, 28}, 1, -1, 1, DType::f32)).shape(),
              (Shape{2, 10}))
        << name;
    const auto color = make_model(name, 3, 7, 32, 1);
    color->eval();
    EXPECT_EQ(color->forward(testing::random_tensor({2, 3, 32, 32}, 2, -1, 1, DType::f32)).shape(),
              (Shape{2, 7}))
        << name;
  }
}

TEST(Zoo, SeedDeterminesTheModel) {
  const auto a = make_model("resnet20", 3, 10, 32, 5)->state_dict();
  const auto b = make_model("resnet20", 3, 10, 32, 5)->state_dict();
  const auto c = make_model("resnet20", 3, 10, 32, 6)->state_dict();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].second.to_vector<double>(), b[i].second.to_vector<double>());
  EXPECT_NE(a[0].second.to_vector<double>(), c[0].second.to_vector<double>());
  EXPECT_NE(a.back().second.to_vector<double>(), c.back().second.to_vector<double>());
}

TEST(Zoo, UnknownNameListsKnownModels) {
  try {
    make_model("resnet19", 3, 10, 32, 0);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\"resnet19\""), std::string::npos) << msg;
    for (const auto& name : model_names()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  EXPECT_THROW(make_model("simple_cnn", 1, 10, 3, 0), ValueError);
  EXPECT_THROW(make_model("resnet20", 0, 10, 32, 0), ValueError);
}

}  // namespace
}  // namespace liftoff

namespace liftoff {
namespace {

// ResNet-20 with batch norm, residual add and ReLU fused (the constructor's default) gives the unfused
// model's loss and gradients, value for value (f32, CPU).
TEST(Zoo, FusedBatchNormReluMatchesTheUnfusedResNet) {
  const Tensor x = testing::random_tensor({4, 1, 12, 12}, 3, -1, 1, DType::f32);
  std::vector<std::vector<Tensor>> grads;
  std::vector<Tensor> outputs;
  for (bool fused : {false, true}) {
    Generator gen(11);
    ResNet model(3, 1, 10, gen, fused);
    model.train();
    const Tensor y = model.forward(x);
    y.backward(testing::random_tensor(y.shape(), 4, -1, 1, DType::f32));
    outputs.push_back(y);
    std::vector<Tensor> g;
    for (const Tensor& p : model.parameters()) g.push_back(p.grad());
    grads.push_back(g);
  }
  // make_model builds the fused default from the same seed: the same output.
  auto zoo_model = make_model("resnet20", 1, 10, 12, 11);
  zoo_model->train();
  EXPECT_TRUE(testing::all_close(zoo_model->forward(x), outputs[1], 0, 0));
  EXPECT_TRUE(testing::all_close(outputs[1], outputs[0], 0, 0));
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_TRUE(testing::all_close(grads[1][i], grads[0][i], 0, 0)) << "parameter " << i;
}

}  // namespace
}  // namespace liftoff
