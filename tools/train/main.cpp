// train: the main job. Trains a model on an image classification data set on the CPU or a CUDA GPU.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "data/dataset.h"
#include "models/train/ddp.h"
#include "models/train/optim.h"
#include "models/report/report.h"
#include "models/train/schedule.h"
#include "models/train/trainer.h"
#include "models/nn/zoo.h"
#include "runtime/config.h"
#include "runtime/determinism.h"
#include "runtime/device_select.h"
#include "runtime/distributed/env.h"
#include "runtime/distributed/process_group.h"
#include "runtime/parallel.h"
#include "tools/common/progress.h"
#include "tools/common/signals.h"
#include "tools/common/stack_dump.h"
#include "tools/train/checkpointing.h"
#include "tools/train/data_setup.h"
#include "tools/train/flags.h"
#include "tools/train/launch.h"

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

// Rank and device of this process: single process, `train --gpus N` children, or mpirun / RANK env ranks.
struct Placement {
  distributed::DistEnv env;
  DeviceChoice choice;
};

Placement place(const Flags& f) {
  Placement p;
  p.env = distributed::discover_env();
  if (!p.env.distributed()) {
    p.choice = resolve_device(f.device);
    return p;
  }
  // One GPU per rank (cuda:local_rank) unless the CPU was asked for (MPI backend).
  if (f.device == "cpu") {
    p.choice = {Device::cpu(), "cpu: rank " + std::to_string(p.env.rank)};
  } else {
    p.choice = resolve_device("cuda:" + std::to_string(p.env.local_rank));
  }
  return p;
}

int run(const Flags& f) {
  tools::install_stack_dump_signal();  // kill -USR1 <pid>: every thread's stack to stderr (a stuck run)
  LIFTOFF_CHECK(f.profile || (f.report.empty() && f.trace.empty()), ValueError,
                "--report and --trace need the profiler: drop --no-profile");
  set_deterministic_algorithms(f.deterministic);
  const Placement placement = place(f);
  // The ranks on one machine share its cores: by default each takes its share, never all of them.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = f.threads > 0 ? f.threads : std::max(1, cores / placement.env.local_world_size);
  set_num_threads(threads);
  const Device device = placement.choice.device;
  use_device(device);  // a rank on cuda:N makes it current, so nothing lands on cuda:0 by default
  const bool rank0 = placement.env.rank == 0;
  std::unique_ptr<distributed::ProcessGroup> group;
  if (placement.env.distributed()) {
    distributed::ProcessGroupOptions go;
    if (device.is_cuda()) go.cuda_device = device.index;
    group = distributed::make_process_group(distributed::backend_for(device), placement.env.rank,
                                            placement.env.world_size, go);
  }

  tools::TrainData data = tools::make_train_data(f, device, placement.env.rank, placement.env.world_size);
  auto model = make_model(f.model, data.channels, data.classes, data.height, f.seed);
  model->to(device);
  std::unique_ptr<DistributedDataParallel> ddp;
  if (group) {
    DDPOptions dopts;
    dopts.bucket_cap_mb = f.bucket_mb;
    ddp = std::make_unique<DistributedDataParallel>(*model, *group, dopts);  // broadcasts rank 0's weights
  }

  const double lr = f.lr > 0 ? f.lr : (f.optimizer == "sgd" ? 0.1 : 1e-3);
  std::unique_ptr<Optimizer> optimizer;
  if (f.optimizer == "sgd") {
    optimizer =
        std::make_unique<SGD>(model->parameters(), lr, f.momentum, f.wd, f.nesterov && f.momentum > 0);
  } else {
    optimizer = std::make_unique<AdamW>(model->parameters(), lr, 0.9, 0.999, 1e-8, f.wd);
  }
  BatchSource& train_batches = *data.train;
  BatchSource& test_batches = *data.test;

  const int64_t micro_per_epoch = train_batches.batches_per_epoch();
  const int64_t steps_per_epoch = (micro_per_epoch + f.accum - 1) / f.accum;
  int64_t total_steps = steps_per_epoch * f.epochs;
  if (f.max_steps >= 0) total_steps = std::min(total_steps, std::max<int64_t>(f.max_steps, 1));
  ScheduleOptions schedule_opts;
  schedule_opts.step_size = f.step_size > 0 ? f.step_size : steps_per_epoch;
  schedule_opts.gamma = f.gamma;
  const auto schedule = make_schedule(f.schedule, lr, total_steps, f.warmup, schedule_opts);

  RunConfig rc;
  rc.device = device.str();
  rc.model = f.model;
  rc.data = f.data;
  rc.batch = f.batch;
  rc.accum = f.accum;
  rc.amp = f.amp;
  rc.augment = data.augment;
  rc.workers = f.workers;
  rc.prefetch = f.prefetch > 0 ? f.prefetch : 2 * f.workers;
  rc.pin_memory = f.pin_memory;
  rc.threads = threads;
  rc.world_size = placement.env.world_size;
  rc.cuda_available = cuda_unavailable_reason(0).empty();
  ProfilerOptions po;
  po.warmup_steps = f.timing_warmup;
  po.keep_trace = !f.trace.empty();
  // The report's communication figures cover the measured steps, like every other stage: the totals at the
  // end of the warm-up are subtracted.
  DDPStats ddp_at_warmup;
  if (ddp) po.on_warmup_end = [&ddp, &ddp_at_warmup] { ddp_at_warmup = ddp->stats(); };
  RunMonitor monitor(rc, device, po);

  TrainerOptions trainer_opts;
  trainer_opts.accum = f.accum;
  trainer_opts.label_smoothing = f.label_smoothing;
  trainer_opts.max_steps = f.max_steps;
  trainer_opts.amp = parse_amp(f.amp);
  trainer_opts.loss_scale = f.loss_scale;
  trainer_opts.ddp = ddp.get();
  trainer_opts.group = group.get();
  trainer_opts.profiler = f.profile ? &monitor.profiler() : nullptr;
  trainer_opts.skip_nonfinite_steps = f.on_nan == "skip";
  trainer_opts.cuda_graphs = parse_graph_mode(f.cuda_graphs);
  trainer_opts.concurrent_micro_batches = parse_branch_mode(f.concurrent_micro_batches);
  Trainer trainer(*model, *optimizer, schedule.get(), trainer_opts);

  // Rank 0 alone writes checkpoints; every rank resumes from the same file.
  tools::RunCheckpoints checkpoints(rank0 ? f : tools::Flags{}, *model, *optimizer, trainer);
  tools::ResumePoint resume_point;
  if (!f.resume.empty()) {
    tools::RunCheckpoints loader(f, *model, *optimizer, trainer);
    resume_point = loader.resume(f.resume, micro_per_epoch);
    if (ddp) ddp->broadcast_buffers();
  }

  if (rank0) {
    std::printf("liftoff train | device %s (%s) | %d CPU threads\n", device.str().c_str(),
                placement.choice.why.c_str(), threads);
    if (group) {
      std::printf("  DDP: world size %d (%s), one process per %s, launched by %s, buckets %.0f MB\n",
                  placement.env.world_size, group->describe().c_str(), device.is_cuda() ? "GPU" : "CPU",
                  placement.env.launcher.c_str(), f.bucket_mb);
    }
    std::printf("  model %s (%s parameters) | data %s: %lld train / %lld test images %lldx%lldx%lld\n",
                f.model.c_str(), with_commas(model->num_parameters()).c_str(), f.data.c_str(),
                static_cast<long long>(data.train_size), static_cast<long long>(data.test_size),
                static_cast<long long>(data.channels), static_cast<long long>(data.height),
                static_cast<long long>(data.width));
    std::printf("  batch %lld x accum %lld%s = %lld per step | %s lr %g (%s%s) | wd %g | amp %s\n",
                static_cast<long long>(f.batch), static_cast<long long>(f.accum),
                group ? (" x " + std::to_string(placement.env.world_size) + " ranks").c_str() : "",
                static_cast<long long>(f.batch * f.accum * placement.env.world_size), f.optimizer.c_str(), lr,
                f.schedule.c_str(), f.warmup > 0 ? (", warm-up " + std::to_string(f.warmup)).c_str() : "",
                f.wd, f.amp.c_str());
    if (device.is_cuda()) {
      std::printf("  CUDA graphs: %s%s%s\n", f.cuda_graphs.c_str(),
                  f.cuda_graphs == "off" ? "" : " (the step is captured after 3 eager steps when it can be)",
                  f.cuda_graphs != "off" && f.accum > 1
                      ? ("; its micro-batches on concurrent streams: " + f.concurrent_micro_batches).c_str()
                      : "");
    }
    std::printf("  loader: %d workers, prefetch %d, %s memory, augment %s\n", f.workers, rc.prefetch,
                !device.is_cuda() ? "host"
                : f.pin_memory    ? "pinned"
                                  : "pageable",
                rc.augment.c_str());
    if (!data.decode.empty()) std::printf("  decode %s\n", data.decode.c_str());
    if (!resume_point.path.empty()) {
      std::printf("  resumed from %s (epoch %lld, step %lld, %lld micro-batches into the epoch)\n",
                  resume_point.path.c_str(), static_cast<long long>(resume_point.epoch + 1),
                  static_cast<long long>(resume_point.step),
                  static_cast<long long>(resume_point.skip_micro_batches));
    }
    std::fflush(stdout);
  }
  tools::install_stop_signals();
  // A non-finite loss is checked wherever the loss is read anyway (progress, checkpoints, epoch ends), never
  // with an extra device sync inside a step.
  int64_t nan_step = -1;
  auto loss_is_bad = [&](double loss) {
    if (std::isfinite(loss) || f.on_nan != "stop") return false;
    nan_step = trainer.global_step();
    trainer.request_stop();
    return true;
  };

  std::unique_ptr<MetricsLog> metrics;
  if (rank0 && !f.log.empty()) metrics = std::make_unique<MetricsLog>(f.log);
  tools::ProgressLine progress;
  double train_seconds = 0.0;
  int64_t train_images = 0;
  // Steady-state throughput: from the end of optimizer step `timing_warmup` (device synchronised once there,
  // outside the timed region) to the end of training.
  int64_t steady_images = 0;
  double steady_seconds = 0.0;
  bool steady_started = f.timing_warmup == 0;
  auto steady_start = std::chrono::steady_clock::now();
  const auto run_start = std::chrono::steady_clock::now();
  double last_accuracy = -1.0;
  double time_to_target = -1.0;  // --target-accuracy: wall seconds from the first step when reached
  if (f.profile) monitor.start();
  for (int64_t epoch = resume_point.epoch; epoch < f.epochs && !trainer.finished(); ++epoch) {
    const std::string label = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(f.epochs);
    int64_t epoch_images_at_start = 0;
    const int64_t skip = epoch == resume_point.epoch ? resume_point.skip_micro_batches : 0;
    const EpochResult r = trainer.train_epoch(
        train_batches, epoch,
        [&](const StepProgress& p) {
          if (tools::stop_signal() != 0) {
            trainer.request_stop();
            if (checkpoints.enabled() && !loss_is_bad(trainer.running_loss())) {
              checkpoints.save(p.epoch, p.micro_batch_in_epoch);
            }
            return;
          }
          if (checkpoints.enabled() && checkpoints.due_at_step(p.global_step) &&
              !loss_is_bad(trainer.running_loss())) {
            checkpoints.save(p.epoch, p.micro_batch_in_epoch);
          }
          if (!steady_started && p.global_step == f.timing_warmup) {
            synchronize(device);
            steady_started = true;
            steady_start = std::chrono::steady_clock::now();
            epoch_images_at_start = p.images;
          }
          if (metrics && p.global_step % f.log_every == 0) {
            MetricsRecord m;
            m.step = p.global_step;
            m.epoch = p.epoch;
            m.loss = trainer.running_loss();  // a device read, only every --log-every steps
            m.lr = p.lr;
            m.images_per_second = p.seconds > 0 ? static_cast<double>(p.images) / p.seconds : 0.0;
            m.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
            metrics->write(m);
          }
          if (!rank0 || !progress.due()) return;
          double running = 0.0;  // a step or so old: reading it must not stop the device
          if (!trainer.recent_loss(&running)) return;
          if (loss_is_bad(running)) return;
          progress.update(label, p.micro_batch_in_epoch, p.micro_batches_per_epoch,
                          "loss " + fmt("%.4f", running) + " | lr " + fmt("%.4g", p.lr) +
                              (f.profile ? " | " + monitor.progress_text() : ""));
        },
        skip);
    if (rank0) progress.finish();
    if (loss_is_bad(r.mean_loss) || nan_step >= 0) break;
    if (tools::stop_signal() != 0) break;
    const bool saved_at_epoch_end = checkpoints.enabled() && (checkpoints.due_at_epoch_end(epoch) ||
                                                              epoch + 1 == f.epochs || trainer.finished());
    if (saved_at_epoch_end) checkpoints.save(epoch + 1, 0);
    train_seconds += r.seconds;
    train_images += r.images;
    if (steady_started) {
      // train_epoch ends with a device synchronisation, so the host clock covers the device work.
      steady_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - steady_start).count();
      steady_images += r.images - epoch_images_at_start;
    }
    std::string line = label + ": train loss " + fmt("%.4f", r.mean_loss) + ", " +
                       fmt("%.0f", static_cast<double>(r.images * placement.env.world_size) / r.seconds) +
                       " img/s (" + fmt("%.1f", r.seconds) + " s, " + std::to_string(r.steps) + " steps)";
    if (!f.no_eval) {
      const EvalResult e = trainer.evaluate(test_batches);
      last_accuracy = e.accuracy;
      line += " | test loss " + fmt("%.4f", e.mean_loss) + ", accuracy " + fmt("%.2f", 100.0 * e.accuracy) +
              "% (" + fmt("%.1f", e.seconds) + " s)";
    }
    if (rank0) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    steady_start = std::chrono::steady_clock::now();  // evaluation is not training time
    if (f.target_accuracy > 0 && last_accuracy >= f.target_accuracy) {
      time_to_target = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
      if (rank0) {
        std::printf(
            "time to %.2f%% test accuracy: %.1f s (epoch %lld; wall time from the first step, data "
            "loading and evaluation included)\n",
            100.0 * f.target_accuracy, time_to_target, static_cast<long long>(epoch + 1));
      }
      if (checkpoints.enabled() && !saved_at_epoch_end)
        checkpoints.save(epoch + 1, 0);  // the weights that did it
      break;
    }
  }
  if (rank0 && f.target_accuracy > 0 && time_to_target < 0) {
    std::printf("target accuracy %.2f%% not reached (last evaluation %.2f%%)\n", 100.0 * f.target_accuracy,
                100.0 * std::max(0.0, last_accuracy));
  }
  const LoaderStats loader_stats = data.train_stats();
  if (rank0 && data.decode_summary) std::printf("%s\n", data.decode_summary().c_str());
  std::optional<CommTimes> comm;
  // DDP times each bucket in eager steps; captured steps are timed by the profiler's allreduce marks
  // instead (the report falls back to them when no CommTimes are given).
  if (ddp && trainer.graph_status().graph_steps == 0) {
    const DDPStats st = ddp->stats();
    const int64_t steps = st.timed_steps - ddp_at_warmup.timed_steps;
    if (steps > 0) {
      const double per = 1.0 / static_cast<double>(steps);
      comm = CommTimes{st.device_timed, (st.comm_ms - ddp_at_warmup.comm_ms) * per,
                       (st.exposed_ms - ddp_at_warmup.exposed_ms) * per,
                       (st.overlapped_ms - ddp_at_warmup.overlapped_ms) * per};
    }
  }
  const GraphStatus& gs = trainer.graph_status();
  GraphReport graphs;
  graphs.mode = graph_mode_name(gs.mode);
  graphs.used = gs.used;
  graphs.reason = gs.reason;
  graphs.captured_at_step = gs.captured_at_step;
  graphs.graph_steps = gs.graph_steps;
  graphs.eager_steps = gs.eager_steps;
  graphs.nodes = gs.nodes;
  graphs.streams = gs.streams;
  graphs.streams_reason = gs.streams_reason;
  RunReport report = f.profile ? monitor.finish(&loader_stats, comm, graphs) : RunReport{};
  if (!f.profile) report.graphs = graphs;
  // Every rank's step time on rank 0 (a collective: all ranks profile or none do, since flags are shared).
  if (group && f.profile) report.rank_step_ms = all_gather_value(*group, report.step_ms_mean);
  if (nan_step >= 0) {
    throw Error(str_cat(
        "the training loss became NaN/inf by optimizer step ", nan_step, "; nothing was saved after it",
        checkpoints.last_saved().empty() ? std::string()
                                         : "; the last good checkpoint is " + checkpoints.last_saved(),
        ". Try a lower --lr, --warmup, or --on-nan skip"));
  }
  if (tools::stop_signal() != 0) {
    if (rank0) {
      std::printf(
          "stopped by %s after optimizer step %lld%s\n",
          tools::stop_signal() == SIGINT ? "SIGINT" : "SIGTERM",
          static_cast<long long>(trainer.global_step()),
          checkpoints.last_saved().empty() ? "" : ("; checkpoint " + checkpoints.last_saved()).c_str());
    }
    return 128 + tools::stop_signal();
  }
  if (ddp) {
    // Every rank states a checksum of its parameters: identical lines mean identical replicas.
    double sum = 0.0, abs_sum = 0.0;
    for (const Tensor& p : model->parameters()) {
      for (double v : p.to_vector<double>()) {
        sum += v;
        abs_sum += std::abs(v);
      }
    }
    std::printf("rank %d: parameter checksum %.17g / %.17g\n", placement.env.rank, sum, abs_sum);
    std::fflush(stdout);
    group->barrier();
  }
  if (!rank0) return 0;
  if (ddp) {
    const DDPStats st = ddp->stats();
    std::printf(
        "ddp: %lld gradient syncs for %lld optimizer steps x %lld micro-batches, %lld bucket all-reduces "
        "(%lld buckets), %.1f MB reduced",
        static_cast<long long>(st.sync_steps), static_cast<long long>(trainer.global_step()),
        static_cast<long long>(f.accum), static_cast<long long>(st.all_reduce_calls),
        static_cast<long long>(ddp->buckets().size()), static_cast<double>(st.bytes_reduced) / 1e6);
    if (gs.graph_steps > 0 && report.allreduce_exposed_ms && report.allreduce_overlapped_ms) {
      const double total = *report.allreduce_exposed_ms + *report.allreduce_overlapped_ms;
      std::printf(
          "; all-reduce %.3f ms/step from the first bucket's start to the last one's end (captured steps, "
          "profiler marks), %.3f ms exposed, %.3f ms overlapped with backward (%.0f%% hidden)",
          total, *report.allreduce_exposed_ms, *report.allreduce_overlapped_ms,
          total > 0 ? 100.0 * *report.allreduce_overlapped_ms / total : 0.0);
    } else if (gs.graph_steps > 0) {
      std::printf("; all-reduce timing of the captured steps comes from the profiler (--profile)");
    } else if (st.device_timed && st.timed_steps > 0) {
      const double per = 1.0 / static_cast<double>(st.timed_steps);
      std::printf(
          "; all-reduce %.3f ms/step on the comm stream, %.3f ms exposed, %.3f ms overlapped with backward "
          "(%.0f%% hidden)",
          st.comm_ms * per, st.exposed_ms * per, st.overlapped_ms * per,
          st.comm_ms > 0 ? 100.0 * st.overlapped_ms / st.comm_ms : 0.0);
    }
    std::printf("\n");
  }
  const double world = static_cast<double>(placement.env.world_size);
  const std::string steady =
      steady_started && steady_seconds > 0
          ? "; steady state " + fmt("%.1f", world * static_cast<double>(steady_images) / steady_seconds) +
                " images/s (after the first " + std::to_string(f.timing_warmup) + " steps)"
          : "";
  if (f.profile) std::printf("%s", report.render_table().c_str());
  if (!f.profile && device.is_cuda()) {  // the table says it otherwise
    std::printf(
        "CUDA graphs: %s\n",
        gs.used ? str_cat(gs.graph_steps, " steps replayed, ", gs.eager_steps, " eager (captured at step ",
                          gs.captured_at_step, ")")
                      .c_str()
                : str_cat("not used (", gs.reason.empty() ? "no step was captured" : gs.reason, ")").c_str());
  }
  if (trainer.scaler().enabled()) {
    std::printf("amp: %s, loss scale %g (%s), %lld optimizer steps skipped for inf/NaN gradients\n",
                f.amp.c_str(), trainer.scaler().current_scale(), f.loss_scale > 0 ? "static" : "dynamic",
                static_cast<long long>(trainer.scaler().skipped_steps().item()));
  }
  if (f.profile && !f.report.empty()) report.write_json(f.report);
  if (f.profile && !f.trace.empty())
    write_trace(f.trace, monitor.profiler(), &monitor.sampler(), monitor.config());
  std::printf(
      "done: %lld optimizer steps, %lld images in %.1f s of training: %.1f images/s%s%s\n",
      static_cast<long long>(trainer.global_step()), static_cast<long long>(train_images * world),
      train_seconds, train_seconds > 0 ? world * static_cast<double>(train_images) / train_seconds : 0.0,
      steady.c_str(),
      last_accuracy >= 0 ? ("; final test accuracy " + fmt("%.2f", 100.0 * last_accuracy) + "%").c_str()
                         : "");
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
  if (flags.print_settings) {
    std::printf("%s", liftoff::config::format_table().c_str());
    return 0;
  }
  try {
    // train --gpus N: this process becomes the launcher of N ranks (one per GPU) and waits for them.
    if (flags.gpus > 1 && !liftoff::distributed::discover_env().distributed()) {
      liftoff::tools::LaunchOptions launch;
      launch.nprocs = flags.gpus;
      launch.args = liftoff::tools::strip_flag(std::vector<std::string>(argv, argv + argc), "--gpus");
      const liftoff::tools::LaunchResult r = liftoff::tools::launch_local(launch);
      if (r.exit_code != 0) std::fprintf(stderr, "train: %s\n", r.message.c_str());
      return r.exit_code;
    }
    return run(flags);
  } catch (const liftoff::ValueError& e) {
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return 1;
  }
}
