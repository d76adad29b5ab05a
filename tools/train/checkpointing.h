// train's checkpoints: periodic saves, exact resume, and the run-defining flags stored with each file.
#pragma once
#include <memory>
#include <string>

#include "models/train/checkpoint.h"
#include "models/nn/module.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"
#include "tools/train/flags.h"

namespace liftoff::tools {

// Where a resumed run starts.
struct ResumePoint {
  std::string path;
  int64_t epoch = 0;
  int64_t skip_micro_batches = 0;  // of `epoch`
  int64_t step = 0;
};

class RunCheckpoints {
 public:
  // dir empty: saving is off. save_every: "N" optimizer steps, "Ne" epochs, "" / "0": only at the end and on
  // signals.
  RunCheckpoints(const Flags& flags, Module& model, Optimizer& optimizer, Trainer& trainer);

  bool enabled() const { return manager_ != nullptr; }
  bool due_at_step(int64_t global_step) const { return every_steps_ > 0 && global_step % every_steps_ == 0; }
  bool due_at_epoch_end(int64_t epoch) const { return every_epochs_ > 0 && (epoch + 1) % every_epochs_ == 0; }
  // Writes a checkpoint of the current state; returns its path ("" when saving is off).
  std::string save(int64_t epoch, int64_t micro_batches_into_epoch);
  const std::string& last_saved() const { return last_saved_; }

  // Loads `what` (a checkpoint file, or a directory: its latest valid checkpoint), checks that the
  // run-defining flags match, restores model, optimizer, scaler and step counter, and says where to continue.
  ResumePoint resume(const std::string& what, int64_t micro_batches_per_epoch);

 private:
  Flags flags_;  // a copy: callers may pass a temporary
  Module& model_;
  Optimizer& optimizer_;
  Trainer& trainer_;
  std::unique_ptr<CheckpointManager> manager_;
  int64_t every_steps_ = 0;
  int64_t every_epochs_ = 0;
  std::string last_saved_;
};

// The flags that define a run (a resumed run must use the same), as one JSON object.
std::string run_defining_config(const Flags& flags);

}  // namespace liftoff::tools
