// Weights from PyTorch (--init-from) and older checkpoint formats: a state_dict written by python3-torch
// loads and computes PyTorch's logits; mismatches are listed as load_state_dict(strict=True) lists them;
// checkpoints of formats 1 and 2 still load.
#include "models/train/weights.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "models/nn/zoo.h"
#include "models/train/checkpoint.h"
#include "models/train/safetensors.h"
#include "runtime/autograd.h"

namespace liftoff {
namespace {

namespace fs = std::filesystem;

std::string data_file(const std::string& name) {
  const std::string relative = "tests/models/train/data/" + name;
  if (const char* root = std::getenv("LIFTOFF_SOURCE_DIR")) return std::string(root) + "/" + relative;
  const std::string here = __FILE__;
  return here.substr(0, here.find_last_of('/')) + "/data/" + name;
}

class WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("liftoff_weights_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The python3-torch file (tools/reference/write_state_dict.py) gives PyTorch's eval-mode logits.
TEST_F(WeightsTest, TorchStateDictComputesTorchLogits) {
  auto model = make_model("strided_cnn", 1, 10, 28, 1);
  load_model_weights(data_file("strided_cnn_torch.safetensors"), *model);
  const SafetensorsFile expected = read_safetensors(data_file("strided_cnn_torch_expected.safetensors"));
  const Tensor& input =
      expected.tensors.at(0).first == "input" ? expected.tensors.at(0).second : expected.tensors.at(1).second;
  const Tensor& logits = expected.tensors.at(0).first == "logits" ? expected.tensors.at(0).second
                                                                  : expected.tensors.at(1).second;
  model->eval();
  NoGradGuard no_grad;
  const std::vector<float> got = model->forward(input).contiguous().to_vector<float>();
  const std::vector<float> want = logits.contiguous().to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << "logit " << i;
  // num_batches_tracked (an i64 buffer) came along too.
  for (const auto& [name, t] : model->state_dict()) {
    if (name == "bn1.num_batches_tracked") {
      EXPECT_EQ(t.to_vector<int64_t>().at(0), 3);
    }
  }
}

TEST_F(WeightsTest, MismatchListsNamesAndShapesLikeStrictLoad) {
  auto five_classes = make_model("strided_cnn", 1, 5, 28, 1);
  const std::string path = data_file("strided_cnn_torch.safetensors");
  const std::string shapes = error_of([&] { load_model_weights(path, *five_classes); });
  EXPECT_NE(shapes.find(path), std::string::npos) << shapes;
  EXPECT_NE(shapes.find("fc.weight: [10, 64] given, [5, 64] expected"), std::string::npos) << shapes;
  EXPECT_NE(shapes.find("fc.bias: [10] given, [5] expected"), std::string::npos) << shapes;

  auto other = make_model("simple_cnn", 1, 10, 28, 1);
  const std::string names = error_of([&] { load_model_weights(path, *other); });
  EXPECT_NE(
      names.find("missing 6 key(s): conv1.bias, conv2.bias, fc1.weight, fc1.bias, fc2.weight, fc2.bias;"),
      std::string::npos)
      << names;
  EXPECT_NE(names.find("unexpected 8 key(s): conv3.weight, bn3.weight, bn3.bias"), std::string::npos)
      << names;
  EXPECT_NE(names.find("size/dtype mismatch for conv1.weight: [16, 1, 3, 3] given, [32, 1, 3, 3] expected"),
            std::string::npos)
      << names;
  EXPECT_NE(names.find("conv2.weight: [32, 16, 3, 3] given, [64, 32, 3, 3] expected"), std::string::npos)
      << names;
  // Nothing was loaded: the model keeps its own weights.
  auto fresh = make_model("simple_cnn", 1, 10, 28, 1);
  EXPECT_EQ(other->state_dict().at(0).second.to_vector<float>(),
            fresh->state_dict().at(0).second.to_vector<float>());
}

TEST_F(WeightsTest, DdpPrefixAndHalfWeightsLoad) {
  auto source = make_model("strided_cnn", 1, 10, 28, 7);
  NamedTensors wrapped;
  for (const auto& [name, t] : source->state_dict())
    wrapped.emplace_back("module." + name, t.dtype() == DType::f32 ? t.to(DType::f16) : t);
  write_safetensors(file("ddp.safetensors"), wrapped);
  auto model = make_model("strided_cnn", 1, 10, 28, 1);
  load_model_weights(file("ddp.safetensors"), *model);
  const auto got = model->state_dict().back().second.to_vector<float>();
  const auto want = source->state_dict().back().second.to(DType::f16).to(DType::f32).to_vector<float>();
  EXPECT_EQ(got, want);
}

TEST_F(WeightsTest, CheckpointModelTensorsCarryPytorchNames) {
  auto source = make_model("strided_cnn", 1, 10, 28, 7);
  CheckpointState state;
  capture_model(*source, "strided_cnn", state);
  save_checkpoint(file("c.safetensors"), state);
  const SafetensorsFile raw = read_safetensors(file("c.safetensors"));
  EXPECT_EQ(raw.tensors.front().first, "conv1.weight");
  auto model = make_model("strided_cnn", 1, 10, 28, 1);
  load_model_weights(file("c.safetensors"), *model);  // a checkpoint works as --init-from too
  EXPECT_EQ(model->state_dict().front().second.to_vector<float>(),
            source->state_dict().front().second.to_vector<float>());
}

// ---- older formats

// A checkpoint as format 1 or 2 wrote it: model tensors as "model/<name>"; format 1's CRC covers the tensor
// bytes alone and it has no run id.
std::string write_old_checkpoint(const std::string& path, int format, Module& model) {
  NamedTensors tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back("model/" + name, t.contiguous());
  std::map<std::string, std::string> meta = {
      {"liftoff.format", "liftoff-checkpoint-" + std::to_string(format)},
      {"liftoff.model", "strided_cnn"},
      {"liftoff.epoch", "1"},
      {"liftoff.step", "7"},
      {"liftoff.batches_into_epoch", "0"},
      {"liftoff.lr", "0.05"}};
  if (format == 1) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (const auto& [name, t] : tensors)
      crc = crc32(crc, static_cast<const Bytef*>(t.raw_data()), static_cast<uInt>(t.nbytes()));
    meta["liftoff.data_crc32"] = std::to_string(crc);
  } else {
    meta["liftoff.run"] = "old-run";
    meta["liftoff.crc32"] = std::to_string(checkpoint_checksum(meta, tensors));
  }
  write_safetensors(path, tensors, meta);
  return path;
}

TEST_F(WeightsTest, Format1LoadsWithAWarning) {
  auto source = make_model("strided_cnn", 1, 10, 28, 3);
  const std::string path = write_old_checkpoint(file("checkpoint-000000000007.safetensors"), 1, *source);
  const CheckpointState st = load_checkpoint(path);
  EXPECT_EQ(st.step, 7);
  EXPECT_EQ(st.run_id, "");
  ASSERT_EQ(st.warnings.size(), 1u);
  EXPECT_NE(st.warnings[0].find("older format 'liftoff-checkpoint-1'"), std::string::npos) << st.warnings[0];
  EXPECT_NE(st.warnings[0].find(path), std::string::npos) << st.warnings[0];
  auto model = make_model("strided_cnn", 1, 10, 28, 1);
  restore_model(st, "strided_cnn", *model);
  EXPECT_EQ(model->state_dict().front().second.to_vector<float>(),
            source->state_dict().front().second.to_vector<float>());
  // A run resumed from it continues that run: the unlabelled file is its own, not another run's.
  EXPECT_THROW(CheckpointManager(dir_.string(), 3, "new-run"), IOError);
  CheckpointManager adopted(dir_.string(), 1, "new-run", /*adopt_unlabelled=*/true);
  CheckpointState next = st;
  next.step = 8;
  adopted.save(next);
  EXPECT_FALSE(fs::exists(path)) << "keep 1: the adopted older file is pruned like the run's own";
}

TEST_F(WeightsTest, Format1StillChecksItsTensorBytes) {
  auto source = make_model("strided_cnn", 1, 10, 28, 3);
  const std::string path = write_old_checkpoint(file("old.safetensors"), 1, *source);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 3] ^= 0x10;  // a bit in fc.bias
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string what = error_of([&] { load_checkpoint(path); });
  EXPECT_NE(what.find("were changed after it was written"), std::string::npos) << what;
}

TEST_F(WeightsTest, Format2LoadsWithoutWarning) {
  auto source = make_model("strided_cnn", 1, 10, 28, 3);
  const CheckpointState st = load_checkpoint(write_old_checkpoint(file("two.safetensors"), 2, *source));
  EXPECT_TRUE(st.warnings.empty());
  EXPECT_EQ(st.run_id, "old-run");
  EXPECT_EQ(st.model.front().first, "conv1.weight");
  auto model = make_model("strided_cnn", 1, 10, 28, 1);
  load_model_weights(file("two.safetensors"), *model);
  EXPECT_EQ(model->state_dict().front().second.to_vector<float>(),
            source->state_dict().front().second.to_vector<float>());
}

TEST_F(WeightsTest, UnknownFormatNamesTheOnesRead) {
  auto source = make_model("strided_cnn", 1, 10, 28, 3);
  const std::string path = write_old_checkpoint(file("nine.safetensors"), 9, *source);
  const std::string what = error_of([&] { load_checkpoint(path); });
  EXPECT_NE(what.find("'liftoff-checkpoint-9' is not one this build reads"), std::string::npos) << what;
}

}  // namespace
}  // namespace liftoff
