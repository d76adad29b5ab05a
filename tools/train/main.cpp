// train: the main job. Trains a model on an image classification data set on the CPU or a CUDA GPU.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/optim.h"
#include "models/schedule.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "runtime/device_select.h"
#include "runtime/parallel.h"
#include "tools/common/progress.h"

namespace {

using namespace liftoff;

struct Flags {
  std::string device = "auto";
  int threads = 0;
  std::string model = "resnet20";
  std::string data = "fashion-mnist";
  std::string data_dir;
  int64_t synthetic_size = 10000;
  int64_t epochs = 3;
  int64_t batch = 128;
  int64_t accum = 1;
  int64_t max_steps = -1;
  uint64_t seed = 0;
  std::string optimizer = "sgd";
  double lr = -1.0;
  double momentum = 0.9;
  bool nesterov = true;
  double wd = 5e-4;
  std::string schedule = "onecycle";
  int64_t warmup = 0;
  int64_t step_size = 0;
  double gamma = 0.1;
  double label_smoothing = 0.0;
  std::string augment = "cpu";
  int pad = 2;
  double random_erase = 0.0;
  bool no_eval = false;
  int64_t timing_warmup = 5;
};

void add_flags(CLI::App& app, Flags& f) {
  const std::string g_dev = "Device";
  app.add_option("--device", f.device, "auto | cpu | cuda | cuda:N (auto: CUDA when usable, else the CPU)")
      ->capture_default_str()
      ->group(g_dev);
  app.add_option("--threads", f.threads, "CPU threads for the CPU backend (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024))
      ->group(g_dev);

  const std::string g_data = "Model and data";
  app.add_option("--model", f.model, "simple_cnn | resnet20 | resnet32 | resnet44 | resnet56")
      ->capture_default_str()
      ->group(g_data);
  app.add_option("--data", f.data, "fashion-mnist | mnist | synthetic")
      ->capture_default_str()
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "synthetic"}))
      ->group(g_data);
  app.add_option("--data-dir", f.data_dir,
                 "folder with the IDX .gz files (default for fashion-mnist: /usr/share/datasets/fashion-mnist)")
      ->group(g_data);
  app.add_option("--synthetic-size", f.synthetic_size, "training images of --data synthetic")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
      ->group(g_data);
  app.add_option("--augment", f.augment, "cpu | none: random crop (--pad) + horizontal flip on the CPU, or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "none"}))
      ->group(g_data);
  app.add_option("--pad", f.pad, "zero padding of the random crop, in pixels")
      ->capture_default_str()
      ->check(CLI::Range(0, 64))
      ->group(g_data);
  app.add_option("--random-erase", f.random_erase, "random erasing probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(g_data);

  const std::string g_train = "Training";
  app.add_option("--epochs", f.epochs, "passes over the training set")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->group(g_train);
  app.add_option("--batch", f.batch, "micro-batch size (images per forward/backward)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->group(g_train);
  app.add_option("--accum", f.accum, "micro-batches accumulated per optimizer step (effective batch = batch * accum)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->group(g_train);
  app.add_option("--max-steps", f.max_steps, "stop after this many optimizer steps (-1: run all epochs)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40))
      ->group(g_train);
  app.add_option("--seed", f.seed, "seed of the weights, the shuffle and the augmentation")
      ->capture_default_str()
      ->group(g_train);
  app.add_option("--label-smoothing", f.label_smoothing, "cross-entropy label smoothing")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999))
      ->group(g_train);
  app.add_flag("--no-eval", f.no_eval, "skip the test-set evaluation after each epoch")->group(g_train);
  app.add_option("--timing-warmup", f.timing_warmup,
                 "optimizer steps left out of the steady-state images/s (start-up, algorithm search)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->group(g_train);

  const std::string g_opt = "Optimizer and schedule";
  app.add_option("--optimizer", f.optimizer, "sgd | adamw")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->group(g_opt);
  app.add_option("--lr", f.lr, "peak learning rate (default: 0.1 for sgd, 0.001 for adamw)")
      ->check(CLI::PositiveNumber)
      ->group(g_opt);
  app.add_option("--momentum", f.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999999))
      ->group(g_opt);
  app.add_flag("--nesterov,!--no-nesterov", f.nesterov, "Nesterov momentum for SGD (default on)")->group(g_opt);
  app.add_option("--wd", f.wd, "weight decay (L2 for sgd, decoupled for adamw)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(g_opt);
  app.add_option("--schedule", f.schedule, "constant | step | cosine | onecycle")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "step", "cosine", "onecycle"}))
      ->group(g_opt);
  app.add_option("--warmup", f.warmup, "linear warm-up, in optimizer steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->group(g_opt);
  app.add_option("--step-size", f.step_size, "--schedule step: optimizer steps between decays (0: one epoch)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->group(g_opt);
  app.add_option("--gamma", f.gamma, "--schedule step: decay factor")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(g_opt);
}

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::pair<ImageDataset, ImageDataset> load_data(const Flags& f) {
  if (f.data == "synthetic") {
    return {make_synthetic_dataset(f.synthetic_size, 1, 28, 28, 10, f.seed + 1),
            make_synthetic_dataset(std::max<int64_t>(f.synthetic_size / 6, 1), 1, 28, 28, 10, f.seed + 2)};
  }
  if (f.data == "mnist") {
    LIFTOFF_CHECK(!f.data_dir.empty(), ValueError, "--data mnist needs --data-dir (the folder with the IDX .gz files)");
    return {load_mnist(f.data_dir, "train"), load_mnist(f.data_dir, "test")};
  }
  const std::string dir = f.data_dir.empty() ? kFashionMnistDefaultDir : f.data_dir;
  return {load_fashion_mnist(dir, "train"), load_fashion_mnist(dir, "test")};
}

int run(const Flags& f) {
  const int threads = f.threads > 0 ? f.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_num_threads(threads);
  const DeviceChoice choice = resolve_device(f.device);
  const Device device = choice.device;

  auto [train_set, test_set] = load_data(f);
  auto model = make_model(f.model, train_set.channels(), train_set.num_classes, train_set.height(), f.seed);
  model->to(device);

  const double lr = f.lr > 0 ? f.lr : (f.optimizer == "sgd" ? 0.1 : 1e-3);
  std::unique_ptr<Optimizer> optimizer;
  if (f.optimizer == "sgd") {
    optimizer = std::make_unique<SGD>(model->parameters(), lr, f.momentum, f.wd, f.nesterov && f.momentum > 0);
  } else {
    optimizer = std::make_unique<AdamW>(model->parameters(), lr, 0.9, 0.999, 1e-8, f.wd);
  }

  InOrderOptions train_opts;
  train_opts.batch = f.batch;
  train_opts.shuffle = true;
  train_opts.augment = f.augment != "none";
  train_opts.augment_config.pad = f.pad;
  train_opts.augment_config.erase_prob = static_cast<float>(f.random_erase);
  train_opts.seed = f.seed;
  train_opts.device = device;
  InOrderBatches train_batches(train_set, train_opts);
  InOrderOptions test_opts;
  test_opts.batch = std::max<int64_t>(f.batch, 256);
  test_opts.shuffle = false;
  test_opts.augment = false;
  test_opts.device = device;
  InOrderBatches test_batches(test_set, test_opts);

  const int64_t micro_per_epoch = train_batches.batches_per_epoch();
  const int64_t steps_per_epoch = (micro_per_epoch + f.accum - 1) / f.accum;
  int64_t total_steps = steps_per_epoch * f.epochs;
  if (f.max_steps >= 0) total_steps = std::min(total_steps, std::max<int64_t>(f.max_steps, 1));
  ScheduleOptions schedule_opts;
  schedule_opts.step_size = f.step_size > 0 ? f.step_size : steps_per_epoch;
  schedule_opts.gamma = f.gamma;
  const auto schedule = make_schedule(f.schedule, lr, total_steps, f.warmup, schedule_opts);

  TrainerOptions trainer_opts;
  trainer_opts.accum = f.accum;
  trainer_opts.label_smoothing = f.label_smoothing;
  trainer_opts.max_steps = f.max_steps;
  Trainer trainer(*model, *optimizer, schedule.get(), trainer_opts);

  std::printf("liftoff train | device %s (%s) | %d CPU threads\n", device.str().c_str(), choice.why.c_str(), threads);
  std::printf("  model %s (%s parameters) | data %s: %lld train / %lld test images %lldx%lldx%lld\n",
              f.model.c_str(), with_commas(model->num_parameters()).c_str(), f.data.c_str(),
              static_cast<long long>(train_set.size()), static_cast<long long>(test_set.size()),
              static_cast<long long>(train_set.channels()), static_cast<long long>(train_set.height()),
              static_cast<long long>(train_set.width()));
  std::printf("  batch %lld x accum %lld = %lld per step | %s lr %g (%s%s) | wd %g | augment %s\n",
              static_cast<long long>(f.batch), static_cast<long long>(f.accum),
              static_cast<long long>(f.batch * f.accum), f.optimizer.c_str(), lr, f.schedule.c_str(),
              f.warmup > 0 ? (", warm-up " + std::to_string(f.warmup)).c_str() : "", f.wd, f.augment.c_str());
  std::fflush(stdout);

  tools::ProgressLine progress;
  double train_seconds = 0.0;
  int64_t train_images = 0;
  // Steady-state throughput: from the end of optimizer step `timing_warmup` (device synchronised once there,
  // outside the timed region) to the end of training.
  int64_t steady_images = 0;
  double steady_seconds = 0.0;
  bool steady_started = f.timing_warmup == 0;
  std::chrono::steady_clock::time_point steady_start = std::chrono::steady_clock::now();
  double last_accuracy = -1.0;
  for (int64_t epoch = 0; epoch < f.epochs && !trainer.finished(); ++epoch) {
    const std::string label = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(f.epochs);
    int64_t epoch_images_at_start = 0;
    const EpochResult r = trainer.train_epoch(train_batches, epoch, [&](const StepProgress& p) {
      if (!steady_started && p.global_step == f.timing_warmup) {
        synchronize(device);
        steady_started = true;
        steady_start = std::chrono::steady_clock::now();
        epoch_images_at_start = p.images;
      }
      if (!progress.due()) return;
      const double ips = p.seconds > 0 ? static_cast<double>(p.images) / p.seconds : 0.0;
      progress.update(label, p.micro_batch_in_epoch, p.micro_batches_per_epoch,
                      "loss " + fmt("%.4f", trainer.running_loss()) + " | " + fmt("%.0f", ips) + " img/s | lr " +
                          fmt("%.4g", p.lr));
    });
    progress.finish();
    train_seconds += r.seconds;
    train_images += r.images;
    if (steady_started) {
      // train_epoch ends with a device synchronisation, so the host clock covers the device work.
      steady_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - steady_start).count();
      steady_images += r.images - epoch_images_at_start;
    }
    std::string line = label + ": train loss " + fmt("%.4f", r.mean_loss) + ", " +
                       fmt("%.0f", static_cast<double>(r.images) / r.seconds) + " img/s (" + fmt("%.1f", r.seconds) +
                       " s, " + std::to_string(r.steps) + " steps)";
    if (!f.no_eval) {
      const EvalResult e = trainer.evaluate(test_batches);
      last_accuracy = e.accuracy;
      line += " | test loss " + fmt("%.4f", e.mean_loss) + ", accuracy " + fmt("%.2f", 100.0 * e.accuracy) + "% (" +
              fmt("%.1f", e.seconds) + " s)";
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    steady_start = std::chrono::steady_clock::now();  // evaluation is not training time
  }
  const std::string steady =
      steady_started && steady_seconds > 0
          ? "; steady state " + fmt("%.1f", static_cast<double>(steady_images) / steady_seconds) +
                " images/s (after the first " + std::to_string(f.timing_warmup) + " steps)"
          : "";
  std::printf("done: %lld optimizer steps, %lld images in %.1f s of training: %.1f images/s%s%s\n",
              static_cast<long long>(trainer.global_step()), static_cast<long long>(train_images), train_seconds,
              train_seconds > 0 ? static_cast<double>(train_images) / train_seconds : 0.0, steady.c_str(),
              last_accuracy >= 0 ? ("; final test accuracy " + fmt("%.2f", 100.0 * last_accuracy) + "%").c_str() : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train: train an image classifier with Liftoff (CPU or CUDA)", "train"};
  app.get_formatter()->column_width(34);
  Flags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "train: %s\nRun 'train --help' for the flags and their defaults.\n", e.what());
    return 2;
  }
  try {
    return run(flags);
  } catch (const liftoff::ValueError& e) {
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return 1;
  }
}
