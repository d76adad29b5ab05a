// train's epoch loop: trains epoch after epoch with progress lines, periodic and signal checkpoints, the
// non-finite loss check, steady-state timing, evaluation and the --target-accuracy stop.
#pragma once
#include <cstdint>

#include "tools/train/checkpointing.h"
#include "tools/train/flags.h"
#include "tools/train/run_setup.h"

namespace liftoff::tools {

struct LoopResult {
  double train_seconds = 0.0;
  int64_t train_images = 0;  // this rank's
  // Steady-state throughput: from the end of optimizer step `timing_warmup` (device synchronised once there,
  // outside the timed region) to the end of training, evaluation left out.
  bool steady_started = false;
  int64_t steady_images = 0;
  double steady_seconds = 0.0;
  double last_accuracy = -1.0;         // the last evaluation's; -1: none
  double time_to_target = -1.0;        // --target-accuracy: wall seconds from the first step when reached
  double train_time_to_target = -1.0;  // ... and the training seconds alone (evaluation left out)
  int64_t nan_step = -1;  // optimizer step by which the loss became NaN/inf (--on-nan stop); -1: never
};

// Runs from `resume` until the last epoch, the step limit, a stop signal, a NaN/inf loss (--on-nan stop) or
// the target accuracy. Starts the run monitor first (with --profile).
LoopResult run_epochs(const Flags& f, TrainSetup& s, RunCheckpoints& checkpoints, const ResumePoint& resume);

}  // namespace liftoff::tools
