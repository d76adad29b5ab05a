// evaluate: a train checkpoint on a data set (by default its own test set): loss, accuracy, per-class
// accuracy and the confusion matrix, on the CPU or a CUDA GPU. By default it scores what train's evaluations
// scored: the EMA of the weights where the run kept one, the run's test-time views, and on CUDA its --amp.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/train/amp.h"
#include "models/train/trainer.h"
#include "ops/cast/cast.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/device_select.h"
#include "tools/common/cli.h"
#include "tools/train/trained_model.h"

namespace {

using namespace liftoff;

struct Options {
  std::string checkpoint;
  std::string data, data_dir, split = "test", device = "auto", json, weights = "auto";
  // Test-time views; unset: as the run evaluated (train's --tta-flip / --tta-shift).
  std::optional<bool> tta_flip, tta_shift;
  bool flip_flag = false, shift_flag = false;  // the flags as parsed
  int64_t batch = 256;
  int workers = 2;
};

struct Evaluation {
  int64_t images = 0;
  double loss_sum = 0.0;
  std::vector<std::vector<int64_t>> confusion;  // [true class][predicted class]
};

Evaluation evaluate(Module& model, BatchSource& source, int64_t classes, const EvalOptions& views) {
  Evaluation e;
  e.confusion.assign(static_cast<size_t>(classes), std::vector<int64_t>(static_cast<size_t>(classes), 0));
  NoGradGuard no_grad;
  source.start_epoch(0);
  Batch batch;
  while (source.next(batch)) {
    const Tensor logits = test_time_logits(model, batch.input, views);
    const int64_t n = logits.size(0);
    e.loss_sum += cross_entropy(logits, batch.labels).item() * static_cast<double>(n);
    const std::vector<float> scores = logits.contiguous().to_vector<float>();
    const std::vector<int64_t> truth = batch.labels.to_vector<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const float* row = scores.data() + i * classes;
      const auto predicted = static_cast<size_t>(std::max_element(row, row + classes) - row);
      ++e.confusion.at(static_cast<size_t>(truth[static_cast<size_t>(i)])).at(predicted);
    }
    e.images += n;
  }
  return e;
}

double ratio(int64_t a, int64_t b) {
  return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
}

// "image + mirror + one-pixel shifts" and its shorter forms.
std::string views_text(const EvalOptions& views) {
  return std::string("image") + (views.hflip ? " + mirror" : "") + (views.shift ? " + one-pixel shifts" : "");
}

nlohmann::json to_json(const Options& o, const tools::TrainedCheckpoint& ckpt, const tools::DataFacts& facts,
                       const Device& device, const tools::TrainedModel& trained, const EvalOptions& views,
                       const Evaluation& e) {
  nlohmann::json j;
  j["checkpoint"] = ckpt.state.path;
  j["model"] = ckpt.flags.model;
  j["step"] = ckpt.state.step;
  j["weights"] = trained.ema_weights ? "ema" : "model";
  j["weights_text"] = trained.weights;
  j["views"] = views_text(views);
  j["tta_flip"] = views.hflip;
  j["tta_shift"] = views.shift;
  j["data"] = ckpt.flags.data;
  j["split"] = o.split;
  j["device"] = device.str();
  j["images"] = e.images;
  int64_t correct = 0;
  std::vector<double> per_class;
  std::vector<int64_t> counts;
  for (size_t c = 0; c < e.confusion.size(); ++c) {
    int64_t row = 0;
    for (const int64_t v : e.confusion[c]) row += v;
    correct += e.confusion[c][c];
    counts.push_back(row);
    per_class.push_back(ratio(e.confusion[c][c], row));
  }
  j["loss"] = e.images > 0 ? e.loss_sum / static_cast<double>(e.images) : 0.0;
  j["accuracy"] = ratio(correct, e.images);
  j["classes"] = facts.class_names;
  j["per_class_images"] = counts;
  j["per_class_accuracy"] = per_class;
  j["confusion"] = e.confusion;  // rows: true class, columns: predicted class
  return j;
}

void print_text(const nlohmann::json& j) {
  std::printf("%s (%s, step %lld) on %s %s: %lld images, %s\n", j["checkpoint"].get<std::string>().c_str(),
              j["model"].get<std::string>().c_str(), static_cast<long long>(j["step"].get<int64_t>()),
              j["data"].get<std::string>().c_str(), j["split"].get<std::string>().c_str(),
              static_cast<long long>(j["images"].get<int64_t>()), j["device"].get<std::string>().c_str());
  std::printf("weights: %s | views: %s\n", j["weights_text"].get<std::string>().c_str(),
              j["views"].get<std::string>().c_str());
  std::printf("loss %.4f, accuracy %.2f%%\n\nper class:\n", j["loss"].get<double>(),
              100.0 * j["accuracy"].get<double>());
  const auto names = j["classes"].get<std::vector<std::string>>();
  for (size_t c = 0; c < names.size(); ++c) {
    std::printf("  %3zu %-16s %6.2f%%  (%lld images)\n", c, names[c].c_str(),
                100.0 * j["per_class_accuracy"][c].get<double>(),
                static_cast<long long>(j["per_class_images"][c].get<int64_t>()));
  }
  std::printf("\nconfusion matrix (rows: true class, columns: predicted class):\n     ");
  for (size_t c = 0; c < names.size(); ++c) std::printf(" %6zu", c);
  std::printf("\n");
  for (size_t r = 0; r < names.size(); ++r) {
    std::printf("  %3zu", r);
    for (size_t c = 0; c < names.size(); ++c)
      std::printf(" %6lld", static_cast<long long>(j["confusion"][r][c].get<int64_t>()));
    std::printf("\n");
  }
}

int run(const Options& o) {
  // Evaluation never drops a batch (the training loader is built too, and must not refuse a small set).
  std::map<std::string, std::string> overrides = {
      {"batch", std::to_string(o.batch)}, {"workers", std::to_string(o.workers)}, {"drop-last", "false"}};
  if (!o.data.empty()) overrides["data"] = o.data;
  if (!o.data_dir.empty()) overrides["data-dir"] = o.data_dir;
  if (o.split == "train") overrides["augment"] = "none";  // the training images as they are
  const tools::TrainedCheckpoint ckpt = tools::read_trained_checkpoint(o.checkpoint, overrides);
  for (const std::string& w : ckpt.state.warnings) std::fprintf(stderr, "evaluate: warning: %s\n", w.c_str());
  const DeviceChoice device = resolve_device(o.device);
  use_device(device.device);
  tools::TrainData data = tools::make_train_data(ckpt.flags, device.device);
  const tools::DataFacts facts = tools::facts_of(data);
  const tools::TrainedModel trained =
      tools::build_trained_model(ckpt, facts, device.device, tools::parse_weights_choice(o.weights));
  EvalOptions views;
  views.hflip = o.tta_flip.value_or(ckpt.flags.tta_flip);
  views.shift = o.tta_shift.value_or(ckpt.flags.tta_shift);
  // On CUDA in the run's precision, as train evaluated (the CPU keeps f32).
  const AutocastGuard autocast(device.device.is_cuda() ? amp_compute_dtype(parse_amp(ckpt.flags.amp))
                                                       : DType::f32);
  const Evaluation e =
      evaluate(*trained.model, o.split == "train" ? *data.train : *data.test, facts.classes, views);
  const nlohmann::json j = to_json(o, ckpt, facts, device.device, trained, views, e);
  if (o.json == "-") {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  print_text(j);
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << j.dump(2) << "\n";
    LIFTOFF_CHECK(out.good(), IOError, "evaluate: cannot write '", o.json, "'; pass a writable --json path");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "evaluate: a train checkpoint's loss, accuracy, per-class accuracy and confusion matrix on a data set",
      "evaluate"};
  app.formatter(std::make_shared<liftoff::tools::HelpFormatter>());
  Options o;
  app.add_option("checkpoint", o.checkpoint,
                 "a checkpoint file, or a directory (its latest valid checkpoint)")
      ->required();
  app.add_option("--data", o.data,
                 "fashion-mnist | mnist | cifar10 | folder | synthetic (default: the run's)")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "folder", "synthetic"}));
  app.add_option("--data-dir", o.data_dir, "the data set's folder (default: the run's)");
  app.add_option("--split", o.split, "test | train")
      ->capture_default_str()
      ->check(CLI::IsMember({"test", "train"}));
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  app.add_option("--batch,--batch-size", o.batch, "images per forward pass")
      ->capture_default_str()
      ->check(liftoff::tools::in_range(int64_t{1}, int64_t{1} << 20));
  app.add_option("-j,--workers", o.workers, "loader threads")
      ->capture_default_str()
      ->check(liftoff::tools::in_range(int64_t{1}, int64_t{256}));
  app.add_option("--weights", o.weights,
                 "auto | ema | model: the checkpoint's EMA of the weights (train --ema) or the last step's "
                 "(auto: the EMA where the checkpoint holds one, as train's evaluations used)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "ema", "model"}));
  // Plain bools (an optional<bool> flag counts its occurrences in CLI11); the last of --x / --no-x wins.
  CLI::Option* flip =
      app.add_flag("--tta-flip,!--no-tta-flip", o.flip_flag,
                   "average each image's logits with its mirror's (default: as the run evaluated)")
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  CLI::Option* shift =
      app.add_flag("--tta-shift,!--no-tta-shift", o.shift_flag,
                   "also average its one-pixel shifts down-right and up-left (default: as the run evaluated)")
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--json", o.json, "also write the results as JSON to this file ('-': only JSON, on stdout)");
  if (const int code = liftoff::tools::parse_command_line(app, argc, argv); code >= 0) return code;
  // Absent means "as the run evaluated".
  if (flip->count() > 0) o.tta_flip = o.flip_flag;
  if (shift->count() > 0) o.tta_shift = o.shift_flag;
  try {
    return run(o);
  } catch (const liftoff::ValueError& e) {
    std::fprintf(stderr, "evaluate: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "evaluate: error: %s\n", e.what());
    return 1;
  }
}
