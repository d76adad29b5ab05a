// The torchvision-style zoo models (resnet18, resnet50, mobilenet_v2, vit_tiny, vgg11): parameter counts
// equal to PyTorch's, state-dict names as torchvision's, and a forward + backward on a tiny CPU batch.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "models/nn/zoo.h"
#include "ops/ops.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

using testing::random_tensor;

bool has_key(const Module& m, const std::string& key) {
  for (const auto& [name, t] : m.state_dict())
    if (name == key) return true;
  return false;
}

// torchvision's published totals (1000 classes, 3 channels, ImageNet stems at 224 px), then the same
// models with 10 classes: fc changes by (in + 1) * (10 - 1000), and the CIFAR stem's 3x3 conv has
// 3*64*9 = 1728 weights instead of the 7x7 stem's 3*64*49 = 9408.
TEST(ZooModels, ResNetParameterCountsMatchTorchvision) {
  EXPECT_EQ(make_model("resnet18", 3, 1000, 224, 0)->num_parameters(), 11689512);
  // 11,173,962: also the count of the well-known CIFAR ResNet18 (kuangliu/pytorch-cifar).
  EXPECT_EQ(11689512 - 9408 + 1728 - 513 * 990, 11173962);
  EXPECT_EQ(make_model("resnet18", 3, 10, 32, 0)->num_parameters(), 11173962);
  EXPECT_EQ(make_model("resnet18", 1, 10, 64, 0)->num_parameters(), 11689512 - 9408 + 64 * 49 - 513 * 990);
  EXPECT_EQ(make_model("resnet50", 3, 1000, 224, 0)->num_parameters(), 25557032);
  EXPECT_EQ(make_model("resnet50", 3, 10, 32, 0)->num_parameters(), 25557032 - 9408 + 1728 - 2049 * 990);
}

TEST(ZooModels, MobileNetV2AndVitParameterCounts) {
  // torchvision.models.mobilenet_v2(): 3,504,872; the classifier is Linear(1280, classes). The stem's
  // stride does not change the count.
  EXPECT_EQ(make_model("mobilenet_v2", 3, 1000, 224, 0)->num_parameters(), 3504872);
  EXPECT_EQ(make_model("mobilenet_v2", 3, 10, 32, 0)->num_parameters(), 3504872 - 1281 * 990);
  // One pre-norm encoder layer of dim 192, MLP 768: in_proj 3*192*192 + 576, out_proj 192*192 + 192,
  // two LayerNorms 4*192, linear1 192*768 + 768, linear2 768*192 + 192 = 444,864 (timm's
  // vit_tiny_patch16_224, depth 12, has 5,717,416 = 12 of these + patch embedding 3*16*16*192 + 192, class
  // token 192, positions 197*192, final norm 384, head 192*1000 + 1000).
  const int64_t layer = 3 * 192 * 192 + 576 + 192 * 192 + 192 + 4 * 192 + 192 * 768 + 768 + 768 * 192 + 192;
  EXPECT_EQ(layer, 444864);
  const int64_t timm_depth12 = 12 * layer + (3 * 256 * 192 + 192) + 192 + 197 * 192 + 384 + 193000;
  EXPECT_EQ(timm_depth12, 5717416);
  EXPECT_EQ(make_model("vit_tiny", 3, 1000, 224, 0)->num_parameters(), timm_depth12 - 6 * layer);
  // 32 px: patch 4 (3*16*192 + 192), 64 + 1 positions, 10 classes.
  EXPECT_EQ(make_model("vit_tiny", 3, 10, 32, 0)->num_parameters(),
            6 * layer + (3 * 16 * 192 + 192) + 192 + 65 * 192 + 384 + 1930);
}

// torchvision's vgg11 features (9,220,480 parameters: 8 convolutions with biases) and Linear(512, classes).
TEST(ZooModels, Vgg11ParameterCountNamesAndPools) {
  EXPECT_EQ(make_model("vgg11", 3, 10, 32, 0)->num_parameters(), 9220480 + 5130);
  const auto vgg = make_model("vgg11", 3, 10, 32, 0);
  for (const char* key : {"features.0.weight", "features.0.bias", "features.3.weight", "features.8.bias",
                          "features.18.weight", "classifier.weight", "classifier.bias"})
    EXPECT_TRUE(has_key(*vgg, key)) << key;
  EXPECT_FALSE(has_key(*vgg, "features.2.weight"));  // a max pool
  // 28 px (Fashion-MNIST) leaves the last pool out and still ends at 1x1; below 16 px there is nothing to
  // pool.
  EXPECT_EQ(
      make_model("vgg11", 1, 10, 28, 0)->forward(random_tensor({2, 1, 28, 28}, 3, -1, 1, DType::f32)).shape(),
      (Shape{2, 10}));
  EXPECT_THROW(make_model("vgg11", 3, 10, 15, 0), ValueError);
}

TEST(ZooModels, StateDictNamesAsTorchvision) {
  const auto r18 = make_model("resnet18", 3, 10, 32, 0);
  // torchvision's resnet18 state dict: 62 parameters + 20 batch norms x 3 buffers.
  EXPECT_EQ(r18->state_dict().size(), 122u);
  for (const char* key :
       {"conv1.weight", "bn1.running_var", "layer1.1.conv2.weight", "layer2.0.downsample.0.weight",
        "layer4.0.downsample.1.num_batches_tracked", "fc.bias"})
    EXPECT_TRUE(has_key(*r18, key)) << key;
  EXPECT_FALSE(has_key(*r18, "layer1.0.downsample.0.weight"));  // identity: no module, as PyTorch's None
  const auto r50 = make_model("resnet50", 3, 10, 32, 0);
  for (const char* key : {"layer1.0.conv3.weight", "layer1.0.downsample.0.weight", "layer4.2.bn3.bias"})
    EXPECT_TRUE(has_key(*r50, key)) << key;
  const auto mobilenet = make_model("mobilenet_v2", 3, 10, 32, 0);
  for (const char* key : {"features.0.0.weight", "features.0.1.running_mean", "features.1.conv.0.0.weight",
                          "features.1.conv.1.weight", "features.2.conv.1.0.weight", "features.17.conv.3.bias",
                          "features.18.0.weight", "classifier.1.weight"})
    EXPECT_TRUE(has_key(*mobilenet, key)) << key;
  const auto vit = make_model("vit_tiny", 3, 10, 32, 0);
  for (const char* key :
       {"class_token", "pos_embedding", "conv_proj.weight", "encoder.0.self_attn.in_proj_weight",
        "encoder.5.linear2.bias", "norm.weight", "head.weight"})
    EXPECT_TRUE(has_key(*vit, key)) << key;
}

// Loss, backward, and a finite gradient reaching every parameter tensor.
void check_forward_backward(Module& model, int64_t channels, int64_t size) {
  model.train();
  const Tensor x = random_tensor({2, channels, size, size}, 8, -1, 1, DType::f32);
  const Tensor y = model.forward(x);
  ASSERT_EQ(y.shape(), (Shape{2, 5}));
  const Tensor loss = cross_entropy(y, Tensor::from_vector<int64_t>({1, 3}, {2}));
  loss.backward();
  EXPECT_TRUE(std::isfinite(loss.item()));
  for (const auto& [pname, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << pname;
    const std::vector<float> g = p.grad().to_vector<float>();
    bool finite = true, nonzero = false;
    for (const float v : g) finite = finite && std::isfinite(v), nonzero = nonzero || v != 0.0f;
    EXPECT_TRUE(finite) << pname;
    EXPECT_TRUE(nonzero) << pname;
  }
}

void check_forward_backward(const std::string& name, int64_t channels, int64_t size) {
  SCOPED_TRACE(name + " at " + std::to_string(size) + " px");
  check_forward_backward(*make_model(name, channels, 5, size, 7), channels, size);
}

TEST(ZooModels, ResNetsTrainOnTinyBatches) {
  check_forward_backward("resnet18", 3, 8);  // CIFAR stem
  check_forward_backward("resnet50", 3, 8);
  // The ImageNet stem (7x7/2 conv, 3x3/2 max pool; make_model uses it from 64 px) on a one-block-per-stage
  // ResNet, to keep the CPU time small.
  Generator gen(3);
  TorchvisionResNet imagenet(TorchvisionResNet::Block::basic, {1, 1, 1, 1}, 1, 5, true, gen);
  check_forward_backward(imagenet, 1, 32);
}

TEST(ZooModels, MobileNetV2AndVitTrainOnTinyBatches) {
  check_forward_backward("mobilenet_v2", 3, 16);
  check_forward_backward("vit_tiny", 1, 8);  // patch 4: 2x2 patches + the class token
  check_forward_backward("vgg11", 3, 16);
}

TEST(ZooModels, VitTakesOnlyItsImageSize) {
  EXPECT_THROW(make_model("vit_tiny", 3, 10, 30, 0), ValueError);   // not a multiple of the patch (4)
  EXPECT_THROW(make_model("vit_tiny", 3, 10, 100, 0), ValueError);  // not a multiple of 16
  const auto vit = make_model("vit_tiny", 1, 10, 8, 0);
  try {
    vit->forward(random_tensor({1, 1, 12, 12}, 1, -1, 1, DType::f32));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[1, 1, 12, 12]"), std::string::npos) << e.what();
  }
}

TEST(ZooModels, MobileNetStemStridesOnlyForLargeImages) {
  // features.0 (the stem): stride 1 below 64 px, torchvision's stride 2 from 64 px on.
  for (const auto& [size, side] : {std::pair<int64_t, int64_t>{32, 32}, {64, 32}}) {
    const auto model = make_model("mobilenet_v2", 3, 4, size, 1);
    ASSERT_EQ(model->named_children().front().first, "features");
    const auto& features = dynamic_cast<const Sequential&>(*model->named_children().front().second);
    EXPECT_EQ(features[0].forward(random_tensor({1, 3, size, size}, 2, -1, 1, DType::f32)).shape(),
              (Shape{1, 32, side, side}))
        << size << " px";
  }
}

}  // namespace
}  // namespace liftoff
