// train: the main job. Trains a model on an image classification data set on the CPU or a CUDA GPU.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config.h"
#include "runtime/determinism.h"
#include "runtime/device_select.h"
#include "runtime/distributed/env.h"
#include "runtime/platform/cpu_usage.h"
#include "tools/common/cli.h"
#include "tools/common/signals.h"
#include "tools/common/stack_dump.h"
#include "tools/train/checkpointing.h"
#include "tools/train/epoch_loop.h"
#include "tools/train/flags.h"
#include "tools/train/launch.h"
#include "tools/train/memory_check.h"
#include "tools/train/reporting.h"
#include "tools/train/resume_config.h"
#include "tools/train/run_setup.h"

namespace {

using namespace liftoff;
using tools::Flags;

// Why the run ended early, as an error (NaN/inf loss) or an exit code (a stop signal); 0 when it did not.
int check_early_end(const tools::TrainSetup& s, const tools::RunCheckpoints& checkpoints,
                    const tools::LoopResult& loop) {
  if (loop.nan_step >= 0) {
    throw Error(str_cat(
        "the training loss became NaN/inf by optimizer step ", loop.nan_step, "; nothing was saved after it",
        checkpoints.last_saved().empty() ? std::string()
                                         : "; the last good checkpoint is " + checkpoints.last_saved(),
        ". Try a lower --lr, --warmup, or --on-nan skip"));
  }
  if (tools::stop_signal() == 0) return 0;
  if (s.rank0) {
    std::printf("stopped by %s after optimizer step %lld%s\n",
                tools::stop_signal() == SIGINT ? "SIGINT" : "SIGTERM",
                static_cast<long long>(s.trainer->global_step()),
                checkpoints.last_saved().empty() ? "" : ("; checkpoint " + checkpoints.last_saved()).c_str());
  }
  return 128 + tools::stop_signal();
}

int run(const Flags& f) {
  tools::install_stack_dump_signal();  // kill -USR1 <pid>: every thread's stack to stderr (a stuck run)
  LIFTOFF_CHECK(f.profile || (f.report.empty() && f.trace.empty()), ValueError,
                "--report and --trace need the profiler: drop --no-profile");
  set_deterministic_algorithms(f.deterministic);
  const std::unique_ptr<tools::TrainSetup> setup = tools::make_train_setup(f);
  tools::TrainSetup& s = *setup;

  // Rank 0 alone writes checkpoints (and locks the directory); every rank resumes from the same file.
  tools::RunCheckpoints checkpoints(f, s.rank0, *s.model, *s.optimizer, *s.trainer, s.micro_per_epoch);
  checkpoints.set_data_facts(tools::data_facts_json(s.data));
  const tools::ResumePoint resume_point = checkpoints.resume_point();
  if (s.ddp && !resume_point.path.empty()) s.ddp->broadcast_buffers();
  tools::check_host_memory(*s.model, f, s.device, s.data);
  if (s.rank0) tools::print_run_header(f, s, resume_point);
  tools::install_stop_signals();

  const tools::LoopResult loop = tools::run_epochs(f, s, checkpoints, resume_point);
  if (s.rank0 && f.target_accuracy > 0 && loop.time_to_target < 0) {
    std::printf("target accuracy %.2f%% not reached (last evaluation %.2f%%)\n", 100.0 * f.target_accuracy,
                100.0 * std::max(0.0, loop.last_accuracy));
  }
  const RunReport report = tools::collect_report(f, s);
  if (const int code = check_early_end(s, checkpoints, loop)) return code;
  if (s.ddp) tools::print_parameter_checksum(s);
  if (s.rank0) tools::print_run_summary(f, s, report, loop);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train: train an image classifier with Liftoff (CPU or CUDA)", "train"};
  Flags flags;
  add_flags(app, flags);
  if (const int code = liftoff::tools::parse_command_line(app, argc, argv); code >= 0) return code;
  if (flags.print_settings) {
    std::printf("%s", liftoff::config::format_table().c_str());
    return 0;
  }
  try {
    const liftoff::distributed::DistEnv env = liftoff::distributed::discover_env();
    const bool launcher = flags.gpus > 1 && !env.distributed();
    // --resume: the checkpoint's flags, with those given again (ranks of --gpus N do this themselves).
    if (!flags.resume.empty() && (flags.print_config || !launcher)) {
      const std::string what = flags.resume;
      const liftoff::tools::ResumedRun resumed = liftoff::tools::apply_resumed_config(app, flags, argc, argv);
      if (env.rank == 0) {
        liftoff::tools::print_passed_over(what, resumed.passed_over, resumed.checkpoint);
        for (const std::string& note : resumed.notes) std::fprintf(stderr, "train: note: %s\n", note.c_str());
      }
    }
    if (flags.print_config) {
      std::printf("%s",
                  liftoff::tools::config_toml(app, "train flags; run with: train --config FILE").c_str());
      return 0;
    }
    flags.stored_config = liftoff::tools::stored_config_json(app);
    // train --gpus N: this process becomes the launcher of N ranks (one per GPU) and waits for them.
    if (launcher) {
      liftoff::tools::LaunchOptions launch;
      launch.nprocs = flags.gpus;
      launch.args = liftoff::tools::strip_flag(std::vector<std::string>(argv, argv + argc), "--gpus");
      const liftoff::tools::LaunchResult r = liftoff::tools::launch_local(launch);
      if (r.exit_code != 0) std::fprintf(stderr, "train: %s\n", r.message.c_str());
      return r.exit_code;
    }
    // --workers 0: a count for this rank's share of the machine, from the final flags (a resumed run's too).
    if (flags.workers == 0) {
      const bool on_cuda = flags.device.rfind("cuda", 0) == 0 ||
                           (flags.device == "auto" && liftoff::cuda_unavailable_reason(0).empty());
      flags.workers = liftoff::tools::default_workers(flags, liftoff::platform::host_cores(),
                                                      env.local_world_size, on_cuda);
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
