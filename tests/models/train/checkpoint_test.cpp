#include "models/train/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/layers.h"
#include "models/train/safetensors.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "tests/models/train/checkpoint_files.h"

namespace liftoff {
namespace {
using namespace testing;  // NOLINT: the file helpers

// ---- checkpoints
// ---------------------------------------------------------------------------------------------

// conv + batch norm (buffers) + dropout (a Generator) + linear, on 1x6x6 inputs.
std::shared_ptr<Sequential> small_model(uint64_t seed) {
  Generator gen(seed);
  auto m = std::make_shared<Sequential>();
  m->push_back(std::make_shared<Conv2d>(1, 3, 3, 1, 1, true, gen));
  m->push_back(std::make_shared<BatchNorm2d>(3));
  m->push_back(std::make_shared<ReLU>());
  m->push_back(std::make_shared<Flatten>());
  m->push_back(std::make_shared<Dropout>(0.3, seed + 100));
  m->push_back(std::make_shared<Linear>(3 * 6 * 6, 4, true, gen));
  return m;
}

struct TinyBatch {
  Tensor x, y;
};
TinyBatch batch(uint64_t seed) {
  Generator gen(seed);
  return {randn({5, 1, 6, 6}, gen), Tensor::from_vector<int64_t>({0, 1, 2, 3, 1}, {5})};
}

void train_step(Module& m, Optimizer& opt, const TinyBatch& b) {
  opt.zero_grad();
  cross_entropy(m.forward(b.x), b.y).backward();
  opt.step();
}

Dropout& dropout_of(Sequential& m) {
  return dynamic_cast<Dropout&>(m[4]);
}

// Trains a few steps, checkpoints, restores into freshly built objects with other seeds, and checks that the
// next step is bit-identical: everything an exact resume needs is in the file.
template <class MakeOpt>
void exact_resume(const MakeOpt& make_opt) {
  CheckpointDir dir;
  auto a = small_model(1);
  auto opt_a = make_opt(*a);
  for (uint64_t s = 0; s < 3; ++s) train_step(*a, *opt_a, batch(s));
  opt_a->set_lr(opt_a->lr() / 3);  // a non-round lr must survive the decimal round trip

  CheckpointState state;
  capture_model(*a, "small", state);
  capture_optimizer(*opt_a, state);
  state.epoch = 2;
  state.step = 3;
  state.batches_into_epoch = 1;
  state.generators["trainer.shuffle"] = {UINT64_MAX, 12345};
  state.metadata["config"] = R"({"lr":0.1})";
  const std::string path = dir.file(CheckpointManager::file_name(3));
  save_checkpoint(path, state);

  const CheckpointState loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.path, path);
  EXPECT_EQ(loaded.model_name, "small");
  EXPECT_EQ(loaded.epoch, 2);
  EXPECT_EQ(loaded.step, 3);
  EXPECT_EQ(loaded.batches_into_epoch, 1);
  EXPECT_EQ(loaded.lr, opt_a->lr());
  EXPECT_EQ(loaded.metadata, state.metadata);
  ASSERT_EQ(loaded.generators.size(), 2u);
  EXPECT_EQ(loaded.generators.at("trainer.shuffle").seed, UINT64_MAX);
  EXPECT_EQ(loaded.generators.at("trainer.shuffle").offset, 12345u);
  EXPECT_EQ(loaded.generators.at("module:4").seed, dropout_of(*a).generator().seed());
  EXPECT_EQ(loaded.generators.at("module:4").offset, dropout_of(*a).generator().offset());
  EXPECT_GT(loaded.generators.at("module:4").offset, 0u);
  expect_same(loaded.model, a->state_dict());
  expect_same(loaded.optimizer, opt_a->named_state());

  auto b = small_model(99);
  auto opt_b = make_opt(*b);
  restore_model(loaded, "small", *b);
  restore_optimizer(loaded, *opt_b);
  EXPECT_EQ(opt_b->lr(), opt_a->lr());
  const TinyBatch next = batch(7);
  train_step(*a, *opt_a, next);
  train_step(*b, *opt_b, next);
  expect_same(b->state_dict(), a->state_dict());
  expect_same(opt_b->named_state(), opt_a->named_state());
  EXPECT_EQ(dropout_of(*b).generator().offset(), dropout_of(*a).generator().offset());
}

TEST(Checkpoint, ExactResumeWithSgdMomentum) {
  exact_resume([](Module& m) { return std::make_unique<SGD>(m.parameters(), 0.1, 0.9, 5e-4, true); });
}

TEST(Checkpoint, ExactResumeWithAdamW) {
  exact_resume([](Module& m) { return std::make_unique<AdamW>(m.parameters(), 1e-2); });
}

TEST(Checkpoint, FileIsPlainSafetensorsWithSections) {
  CheckpointDir dir;
  auto m = small_model(1);
  SGD opt(m->parameters(), 0.1, 0.9);
  CheckpointState state;
  capture_model(*m, "small", state);
  capture_optimizer(opt, state);
  state.extra.emplace_back("note", Tensor::from_vector<int64_t>({42}, {1}));
  const std::string path = dir.file("c.safetensors");
  save_checkpoint(path, state);
  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.tensors.front().first, "0.weight");  // format 3: PyTorch's names
  EXPECT_EQ(f.tensors.back().first, "extra/note");
  EXPECT_EQ(f.metadata.at("liftoff.format"), kCheckpointFormat);
  EXPECT_EQ(f.metadata.at("liftoff.model"), "small");
  EXPECT_EQ(load_checkpoint(path).extra.at(0).second.to_vector<int64_t>(), std::vector<int64_t>{42});
}

TEST(Checkpoint, RejectsReservedMetadataAndBadGeneratorNames) {
  CheckpointDir dir;
  CheckpointState state;
  state.metadata["liftoff.step"] = "1";
  EXPECT_THROW(save_checkpoint(dir.file("a.safetensors"), state), ValueError);
  state.metadata.clear();
  state.generators["has space"] = {};
  EXPECT_THROW(save_checkpoint(dir.file("a.safetensors"), state), ValueError);
  EXPECT_FALSE(fs::exists(dir.file("a.safetensors")));
}

// Writes a checkpoint of the small model with a modified metadata map (bypassing save_checkpoint's checks).
std::string checkpoint_with_metadata(const CheckpointDir& dir,
                                     const std::function<void(SafetensorsFile&)>& edit) {
  const std::string good = dir.file("good.safetensors");
  CheckpointState state;
  capture_model(*small_model(1), "small", state);
  save_checkpoint(good, state);
  SafetensorsFile f = read_safetensors(good);
  edit(f);
  const std::string path = dir.file("edited.safetensors");
  write_safetensors(path, f.tensors, f.metadata);
  return path;
}

TEST(BadCheckpoint, NotALiftoffCheckpoint) {
  CheckpointDir dir;
  const std::string path = dir.file("plain.safetensors");
  write_safetensors(path, {{"w", Tensor::zeros({2})}});
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "is not a Liftoff checkpoint");
}

TEST(BadCheckpoint, OtherFormatVersion) {
  CheckpointDir dir;
  const auto path =
      checkpoint_with_metadata(dir, [](SafetensorsFile& f) { f.metadata["liftoff.format"] = "x-9"; });
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "format 'x-9' is not one this build reads");
}

TEST(BadCheckpoint, BadCounter) {
  CheckpointDir dir;
  const auto path =
      checkpoint_with_metadata(dir, [](SafetensorsFile& f) { f.metadata["liftoff.step"] = "-3"; });
  expect_error<IOError>([&] { load_checkpoint(path); }, path,
                        "metadata 'liftoff.step' = '-3' is not an integer");
  const auto path2 =
      checkpoint_with_metadata(dir, [](SafetensorsFile& f) { f.metadata.erase("liftoff.epoch"); });
  expect_error<IOError>([&] { load_checkpoint(path2); }, path2, "metadata 'liftoff.epoch' is missing");
}

TEST(BadCheckpoint, BadGeneratorState) {
  CheckpointDir dir;
  const auto path =
      checkpoint_with_metadata(dir, [](SafetensorsFile& f) { f.metadata["liftoff.rng.module:4"] = "12"; });
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "is not a generator state");
}

TEST(BadCheckpoint, BadLearningRate) {
  CheckpointDir dir;
  const auto path =
      checkpoint_with_metadata(dir, [](SafetensorsFile& f) { f.metadata["liftoff.lr"] = "nan"; });
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "is not a learning rate");
}

TEST(BadCheckpoint, UnknownReservedKey) {
  CheckpointDir dir;
  const auto path =
      checkpoint_with_metadata(dir, [](SafetensorsFile& f) { f.metadata["liftoff.future"] = "1"; });
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "unknown metadata key 'liftoff.future'");
}

TEST(BadCheckpoint, TensorOutsideSections) {
  CheckpointDir dir;
  // Formats 1 and 2 put model tensors under "model/" (format 3 under their own names: a stray one is an
  // unexpected key on restore).
  const auto path = checkpoint_with_metadata(dir, [](SafetensorsFile& f) {
    f.metadata["liftoff.format"] = "liftoff-checkpoint-2";
    for (auto& entry : f.tensors) {
      if (entry.first.find('/') == std::string::npos) entry.first = "model/" + entry.first;
    }
    f.tensors.emplace_back("stray", Tensor::zeros({0}));
  });
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "tensor 'stray' is in no section");
}

TEST(BadCheckpoint, FlippedDataByteFailsTheCrc) {
  CheckpointDir dir;
  const std::string path = dir.file("c.safetensors");
  CheckpointState state;
  capture_model(*small_model(1), "small", state);
  save_checkpoint(path, state);
  std::string bytes = read_all(path);
  bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 0x10);
  write_all(path, bytes);
  expect_error<IOError>([&] { load_checkpoint(path); }, path,
                        "header, metadata or tensor data were changed after it was written (CRC-32");
}

TEST(BadCheckpoint, TruncatedFile) {
  CheckpointDir dir;
  const std::string path = dir.file("c.safetensors");
  CheckpointState state;
  capture_model(*small_model(1), "small", state);
  save_checkpoint(path, state);
  fs::resize_file(path, fs::file_size(path) - 100);
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "run past the end of the data");
  fs::resize_file(path, 20);
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "runs past the end of the file");
}

class RestoreMismatch : public ::testing::Test {
 protected:
  void SetUp() override {
    capture_model(*small_model(1), "small", state_);
    SGD opt(small_model(1)->parameters(), 0.1, 0.9);
    capture_optimizer(opt, state_);
    state_.path = "/ckpt/checkpoint-000000000007.safetensors";
  }
  // Expects restore_model to throw ValueError naming the file and `fragment`, leaving the model untouched.
  void expect_model_rejected(const std::string& name, const std::string& fragment) {
    auto m = small_model(5);
    const StateDict before = small_model(5)->state_dict();
    expect_error<ValueError>([&] { restore_model(state_, name, *m); }, state_.path, fragment);
    expect_same(m->state_dict(), before);
  }
  CheckpointState state_;
};

TEST_F(RestoreMismatch, CheckpointOfAnotherModel) {
  expect_model_rejected(
      "resnet20",
      "holds a small model, but this run builds resnet20; pass --model small or a checkpoint of "
      "resnet20");
}
TEST_F(RestoreMismatch, MissingKeys) {
  state_.model.erase(state_.model.begin());
  expect_model_rejected("small", "missing 1 key(s): 0.weight");
}
TEST_F(RestoreMismatch, UnexpectedKeys) {
  state_.model.emplace_back("head.weight", Tensor::zeros({1}));
  expect_model_rejected("small", "unexpected 1 key(s): head.weight");
}
TEST_F(RestoreMismatch, ShapeMismatch) {
  state_.model[0].second = Tensor::zeros({3, 1, 5, 5});
  expect_model_rejected("small",
                        "size/dtype mismatch for 0.weight: [3, 1, 5, 5] given, [3, 1, 3, 3] expected");
}
TEST_F(RestoreMismatch, MissingDropoutGenerator) {
  state_.generators.clear();
  expect_model_rejected("small", "no generator state for module:4");
}
TEST_F(RestoreMismatch, OptimizerOfAnotherKind) {
  auto m = small_model(1);
  AdamW adamw(m->parameters());
  expect_error<ValueError>(
      [&] { restore_optimizer(state_, adamw); }, state_.path,
      "missing 18 key(s): exp_avg.0, exp_avg_sq.0, step.0, exp_avg.1, exp_avg_sq.1 and 13 more; "
      "unexpected 6 key(s)");
}
TEST_F(RestoreMismatch, OptimizerShapeMismatch) {
  state_.optimizer[1].second = Tensor::zeros({7});
  auto m = small_model(1);
  SGD opt(m->parameters(), 0.1, 0.9);
  expect_error<ValueError>([&] { restore_optimizer(state_, opt); }, state_.path,
                           "size/dtype mismatch for momentum_buffer.1: [7] given, [3] expected");
}

// ---- directories: atomicity, latest valid, pruning
// -----------------------------------------------------------

CheckpointState state_at(int64_t step) {
  CheckpointState s;
  s.step = step;
  s.model.emplace_back("w", Tensor::full({64}, static_cast<double>(step)));
  return s;
}

TEST(CheckpointDir, TornTempFileIsIgnored) {
  CheckpointDir dir;
  auto manager = std::make_unique<CheckpointManager>(dir.str(), 0);
  const std::string good = manager->save(state_at(10));
  const std::string run = manager->run_id();
  // A writer killed mid-save at step 20: half a file under the temporary name.
  const std::string full = dir.file("full.bin");
  save_checkpoint(full, state_at(20));
  const std::string bytes = read_all(full);
  fs::remove(full);
  const std::string torn = dir.file(CheckpointManager::file_name(20) + ".tmp-4242");
  write_all(torn, bytes.substr(0, bytes.size() / 2));
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_checkpoint(dir.str(), &skipped), good);
  EXPECT_TRUE(skipped.empty());
  EXPECT_EQ(resolve_checkpoint(dir.str()), good);
  EXPECT_EQ(load_checkpoint(resolve_checkpoint(dir.str())).step, 10);
  // The next manager of the run (resumed) clears the leftover.
  manager.reset();
  CheckpointManager next(dir.str(), 0, run);
  EXPECT_FALSE(fs::exists(torn));
  EXPECT_TRUE(fs::exists(good));
}

TEST(CheckpointDir, TruncatedLatestIsSkipped) {
  CheckpointDir dir;
  CheckpointManager manager(dir.str(), 0);
  const std::string older = manager.save(state_at(10));
  const std::string newer = manager.save(state_at(20));
  fs::resize_file(newer, fs::file_size(newer) - 100);  // inside the 256 data bytes
  expect_error<IOError>([&] { load_checkpoint(newer); }, newer, "run past the end of the data");
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_checkpoint(dir.str(), &skipped), older);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find(newer), std::string::npos);
  EXPECT_EQ(resolve_checkpoint(newer),
            newer);  // a named file is returned as is; loading it reports the problem
}

TEST(CheckpointDir, NoValidCheckpoint) {
  CheckpointDir dir;
  EXPECT_EQ(latest_checkpoint(dir.str()), "");
  EXPECT_EQ(latest_checkpoint(dir.file("missing")), "");
  expect_error<IOError>(
      [&] { resolve_checkpoint(dir.str()); }, dir.str(),
      "no valid checkpoint in '" + dir.str() + "' (no checkpoint-<step>.safetensors files)");
  write_all(dir.file(CheckpointManager::file_name(5)), "garbage");
  expect_error<IOError>([&] { resolve_checkpoint(dir.str()); }, CheckpointManager::file_name(5),
                        "1 rejected, newest: safetensors file");
  expect_error<IOError>([&] { resolve_checkpoint(dir.file("nope")); }, dir.file("nope"),
                        "no such file or directory");
}

TEST(CheckpointDir, OnlyCheckpointNamesAreCandidates) {
  CheckpointDir dir;
  CheckpointManager manager(dir.str(), 0);
  const std::string good = manager.save(state_at(3));
  save_checkpoint(dir.file("checkpoint-x9.safetensors"), state_at(9));
  save_checkpoint(dir.file("model.safetensors"), state_at(8));
  EXPECT_EQ(latest_checkpoint(dir.str()), good);
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != "liftoff-run.lock")
      out.push_back(e.path().filename().string());  // a live run's
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CheckpointDir, KeepsTheLastK) {
  CheckpointDir dir;
  CheckpointManager manager(dir.str(), 3);
  for (int64_t step : {5, 1, 2, 6, 3, 4}) manager.save(state_at(step));
  EXPECT_EQ(names_in(dir.str()),
            (std::vector<std::string>{CheckpointManager::file_name(4), CheckpointManager::file_name(5),
                                      CheckpointManager::file_name(6)}));
  EXPECT_EQ(load_checkpoint(latest_checkpoint(dir.str())).step, 6);
}

TEST(CheckpointDir, KeepZeroKeepsAll) {
  CheckpointDir dir;
  CheckpointManager manager(dir.str(), 0);
  for (int64_t step = 0; step < 5; ++step) manager.save(state_at(step));
  EXPECT_EQ(names_in(dir.str()).size(), 5u);
  EXPECT_THROW(CheckpointManager(dir.str(), -1), ValueError);
}

TEST(CheckpointDir, PruneNeverDeletesWhatWasJustSaved) {
  CheckpointDir dir;
  CheckpointManager(dir.str(), 0, "run-a").save(state_at(200));  // the run got further once, then resumed
  CheckpointManager manager(dir.str(), 1, "run-a");              // from an earlier checkpoint
  const std::string saved = manager.save(state_at(150));
  EXPECT_EQ(names_in(dir.str()), std::vector<std::string>{CheckpointManager::file_name(150)});
  EXPECT_EQ(load_checkpoint(saved).step, 150);
}

TEST(CheckpointDir, DirectoryThatIsAFile) {
  CheckpointDir dir;
  write_all(dir.file("f"), "x");
  expect_error<IOError>([&] { CheckpointManager(dir.file("f"), 1); }, dir.file("f"), "cannot create it");
}

}  // namespace

// ---- issue 25: checksummed headers, non-finite weights, fall-back, run ownership
// ---------------------------------------------------

std::string replace_once(std::string bytes, const std::string& from, const std::string& to) {
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) bytes.replace(at, from.size(), to);
  return bytes;
}

TEST(BadCheckpoint, EditedDtypeInTheHeaderFailsTheChecksum) {
  CheckpointDir dir;
  const std::string path = dir.file("c.safetensors");
  CheckpointState state;
  capture_model(*small_model(1), "small", state);
  save_checkpoint(path, state);
  // The same length: every offset still fits, only the meaning of the bytes changes (weights of ~1e9).
  write_all(path, replace_once(read_all(path), "\"F32\"", "\"I32\""));
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "were changed after it was written");
}

TEST(BadCheckpoint, EditedCounterFailsTheChecksum) {
  CheckpointDir dir;
  const auto path =
      checkpoint_with_metadata(dir, [](SafetensorsFile& f) { f.metadata["liftoff.step"] = "20"; });
  expect_error<IOError>([&] { load_checkpoint(path); }, path, "were changed after it was written");
}

// A checkpoint whose checksum is right but whose model holds a NaN (as if written by a diverged run).
std::string nan_checkpoint(const std::string& path, const std::string& run_id = "") {
  CheckpointState state = state_at(20);
  state.run_id = run_id;
  save_checkpoint(path, state);
  SafetensorsFile f = read_safetensors(path);
  f.tensors[0].second.data<float>()[3] = std::nanf("");
  f.metadata["liftoff.crc32"] = std::to_string(checkpoint_checksum(f.metadata, f.tensors));
  write_safetensors(path, f.tensors, f.metadata);
  return path;
}

TEST(BadCheckpoint, NonFiniteWeightsAreNeverResumedNorSaved) {
  CheckpointDir dir;
  const std::string path = nan_checkpoint(dir.file("nan.safetensors"));
  expect_error<IOError>([&] { load_checkpoint(path); }, path,
                        "tensor 'w' holds a NaN or infinite value (at index [3])");
  CheckpointState state = state_at(1);
  state.model[0].second.data<float>()[0] = INFINITY;
  expect_error<Error>([&] { save_checkpoint(dir.file("inf.safetensors"), state); },
                      dir.file("inf.safetensors"), "holds a NaN or infinite value");
  EXPECT_FALSE(fs::exists(dir.file("inf.safetensors")));
}

TEST_F(RestoreMismatch, DtypeMismatch) {
  state_.model[0].second = Tensor::zeros({3, 1, 3, 3}, DType::f64);
  expect_model_rejected("small", "size/dtype mismatch for 0.weight: f64 given, f32 expected");
}

TEST(CheckpointDir, ResumeFallsBackAndSaysWhichFileItPassedOver) {
  CheckpointDir dir;
  std::string older;
  {
    CheckpointManager manager(dir.str(), 0, "run-a");
    older = manager.save(state_at(10));
  }
  const std::string newer = nan_checkpoint(dir.file(CheckpointManager::file_name(20)), "run-a");
  std::vector<std::string> rejected;
  EXPECT_EQ(resolve_checkpoint(dir.str(), &rejected), older);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_NE(rejected[0].find(newer), std::string::npos) << rejected[0];
  EXPECT_NE(rejected[0].find("NaN or infinite"), std::string::npos) << rejected[0];
  // A caller's check (train: the "config" metadata parses) rejects the same way.
  rejected.clear();
  const auto no_step_10 = [](const CheckpointState& s) {
    if (s.step == 10) throw IOError(str_cat("checkpoint '", s.path, "': refused by the caller"));
  };
  expect_error<IOError>([&] { resolve_checkpoint(dir.str(), &rejected, no_step_10); }, dir.str(),
                        "2 rejected");
}

TEST(CheckpointDir, ASecondRunIsLockedOut) {
  CheckpointDir dir;
  CheckpointManager first(dir.str(), 0);
  expect_error<IOError>([&] { CheckpointManager second(dir.str(), 0, first.run_id()); }, dir.str(),
                        "is in use by another run (pid " + std::to_string(::getpid()));
  EXPECT_TRUE(first.lock_note().empty());
}

TEST(CheckpointDir, AStaleLockOfADeadProcessIsTakenOver) {
  CheckpointDir dir;
  write_all(dir.file("liftoff-run.lock"), "pid 999999 on elsewhere, run old\n");  // nobody holds it
  CheckpointManager manager(dir.str(), 0);
  EXPECT_NE(manager.lock_note().find("from a process that is gone (pid 999999 on elsewhere, run old)"),
            std::string::npos)
      << manager.lock_note();
  manager.save(state_at(1));
}

TEST(CheckpointDir, TheLockIsReleasedWithTheManager) {
  CheckpointDir dir;
  { CheckpointManager first(dir.str(), 0, "run-a"); }
  EXPECT_FALSE(fs::exists(dir.file("liftoff-run.lock")));
  CheckpointManager again(dir.str(), 0, "run-a");
  EXPECT_TRUE(again.lock_note().empty());
}

TEST(CheckpointDir, ANewRunRefusesADirectoryOfAnotherRun) {
  CheckpointDir dir;
  { CheckpointManager(dir.str(), 1, "run-a").save(state_at(5)); }
  const std::vector<std::string> before = names_in(dir.str());
  expect_error<IOError>([&] { CheckpointManager(dir.str(), 1); }, dir.str(),
                        "holds checkpoints of another run (run run-a: " + CheckpointManager::file_name(5) +
                            "); this run would prune or overwrite them. Continue that run with --resume");
  EXPECT_EQ(names_in(dir.str()), before);
  EXPECT_EQ(load_checkpoint(dir.file(CheckpointManager::file_name(5))).run_id, "run-a");
}

TEST(CheckpointDir, KeepCountsAndDeletesOnlyTheRunsOwnFiles) {
  CheckpointDir dir;
  const std::string unknown = dir.file(CheckpointManager::file_name(1));
  write_all(unknown, "not ours, not readable");
  CheckpointManager manager(dir.str(), 1);
  manager.save(state_at(5));
  const std::string six = manager.save(state_at(6));
  EXPECT_EQ(names_in(dir.str()),
            (std::vector<std::string>{CheckpointManager::file_name(1), CheckpointManager::file_name(6)}));
  EXPECT_EQ(read_all(unknown), "not ours, not readable");
  EXPECT_EQ(load_checkpoint(six).run_id, manager.run_id());
}

TEST(CheckpointDir, NeverOverwritesAFileItDidNotWrite) {
  CheckpointDir dir;
  const std::string unknown = dir.file(CheckpointManager::file_name(5));
  write_all(unknown, "someone's file");
  CheckpointManager manager(dir.str(), 0);
  expect_error<IOError>([&] { manager.save(state_at(5)); }, unknown,
                        "exists and was not written by this run");
  EXPECT_EQ(read_all(unknown), "someone's file");
}

}  // namespace liftoff
