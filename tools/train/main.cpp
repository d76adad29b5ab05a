// train: the main job. Trains a model on an image classification data set on the CPU or a CUDA GPU.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "data/dataset.h"
#include "models/optim.h"
#include "models/schedule.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "runtime/device_select.h"
#include "runtime/parallel.h"
#include "tools/common/progress.h"
#include "tools/train/data_setup.h"
#include "tools/train/flags.h"

namespace {

using namespace liftoff;
using tools::Flags;

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

int run(const Flags& f) {
  const int threads = f.threads > 0 ? f.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_num_threads(threads);
  const DeviceChoice choice = resolve_device(f.device);
  const Device device = choice.device;

  tools::TrainData data = tools::make_train_data(f, device);
  auto model = make_model(f.model, data.channels, data.classes, data.height, f.seed);
  model->to(device);

  const double lr = f.lr > 0 ? f.lr : (f.optimizer == "sgd" ? 0.1 : 1e-3);
  std::unique_ptr<Optimizer> optimizer;
  if (f.optimizer == "sgd") {
    optimizer = std::make_unique<SGD>(model->parameters(), lr, f.momentum, f.wd, f.nesterov && f.momentum > 0);
  } else {
    optimizer = std::make_unique<AdamW>(model->parameters(), lr, 0.9, 0.999, 1e-8, f.wd);
  }
  DataLoader& train_batches = *data.train;
  DataLoader& test_batches = *data.test;

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
              static_cast<long long>(data.train_size), static_cast<long long>(data.test_size),
              static_cast<long long>(data.channels), static_cast<long long>(data.height),
              static_cast<long long>(data.width));
  std::printf("  batch %lld x accum %lld = %lld per step | %s lr %g (%s%s) | wd %g\n", static_cast<long long>(f.batch),
              static_cast<long long>(f.accum), static_cast<long long>(f.batch * f.accum), f.optimizer.c_str(), lr,
              f.schedule.c_str(), f.warmup > 0 ? (", warm-up " + std::to_string(f.warmup)).c_str() : "", f.wd);
  std::printf("  loader: %d workers, prefetch %d, %s memory, augment %s\n", f.workers,
              f.prefetch > 0 ? f.prefetch : 2 * f.workers, f.pin_memory ? "pinned" : "pageable",
              augment_mode_name(train_batches.augment_mode()));
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
