// train's checkpoints: periodic saves, exact resume, and the run-defining flags stored with each file.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/nn/module.h"
#include "models/train/checkpoint.h"
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
  // With --resume: loads the checkpoint (a file, or a directory's latest valid one: newer files passed over
  // are named on stderr with the reason; main has already applied its stored flags, resume_config.h) and
  // restores model, optimizer, scaler and step counter (every rank). With --init-from: loads model weights.
  // Then, when `writer` (rank 0) and a directory is known
  // (--checkpoint-dir, else the directory resumed from), takes the directory for this run: its lock, and the
  // run id of the checkpoint resumed (a new id otherwise); see CheckpointManager.
  RunCheckpoints(const Flags& flags, bool writer, Module& model, Optimizer& optimizer, Trainer& trainer,
                 int64_t micro_batches_per_epoch);

  bool enabled() const { return manager_ != nullptr; }
  // Stored with every checkpoint as its "dataset" metadata (data_facts_json): what evaluate and predict need.
  void set_data_facts(std::string json) { data_facts_ = std::move(json); }
  bool due_at_step(int64_t global_step) const { return every_.steps > 0 && global_step % every_.steps == 0; }
  bool due_at_epoch_end(int64_t epoch) const { return every_.epochs > 0 && (epoch + 1) % every_.epochs == 0; }
  // Writes a checkpoint of the current state; returns its path ("" when saving is off).
  std::string save(int64_t epoch, int64_t micro_batches_into_epoch);
  const std::string& last_saved() const { return last_saved_; }
  // Where training continues (all zero and no path without --resume).
  const ResumePoint& resume_point() const { return resume_point_; }

 private:
  ResumePoint resume(const std::string& what, int64_t micro_batches_per_epoch, bool writer);

  Flags flags_;  // a copy: callers may pass a temporary
  Module& model_;
  Optimizer& optimizer_;
  Trainer& trainer_;
  std::unique_ptr<CheckpointManager> manager_;
  SaveEvery every_;
  std::string last_saved_;
  std::string run_id_;  // of the checkpoint resumed
  std::string data_facts_;
  ResumePoint resume_point_;
};

// The newer checkpoints --resume DIR passed over (why), and the one it fell back to, as warnings on stderr.
void print_passed_over(const std::string& what, const std::vector<std::string>& passed_over,
                       const std::string& chosen);

}  // namespace liftoff::tools
