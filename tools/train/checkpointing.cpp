#include "tools/train/checkpointing.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "models/train/ema.h"
#include "models/train/weights.h"

namespace liftoff::tools {

namespace {

namespace fs = std::filesystem;

// Counters that must fit this run: an epoch beyond --epochs, or more micro-batches into the epoch than an
// epoch has, means another data set or batch size.
void check_position(const CheckpointState& st, const Flags& f, int64_t micro_batches_per_epoch) {
  LIFTOFF_CHECK(st.epoch <= f.epochs, ValueError, "--resume ", st.path, ": it is at epoch ", st.epoch + 1,
                " but this run has --epochs ", f.epochs, "; pass --epochs ", st.epoch + 1, " or more");
  LIFTOFF_CHECK(f.max_steps < 0 || f.max_steps >= st.step, ValueError, "--resume ", st.path,
                ": it is at step ", st.step, " but this run has --max-steps ", f.max_steps,
                "; pass --max-steps ", st.step, " or more (or -1: all epochs)");
  LIFTOFF_CHECK(st.batches_into_epoch <= micro_batches_per_epoch, ValueError, "--resume ", st.path,
                ": it is ", st.batches_into_epoch, " micro-batches into epoch ", st.epoch + 1,
                ", but an epoch has ", micro_batches_per_epoch,
                " here; was it written for another data set?");
}

// With --resume and no --checkpoint-dir, the run goes on saving where it was resumed from.
std::string checkpoint_dir_of(const Flags& f) {
  if (!f.checkpoint_dir.empty() || f.resume.empty()) return f.checkpoint_dir;
  std::error_code ec;
  if (fs::is_directory(f.resume, ec)) return f.resume;
  const fs::path parent = fs::path(f.resume).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

void print_passed_over(const std::string& what, const std::vector<std::string>& passed_over,
                       const std::string& chosen) {
  for (const std::string& why : passed_over)
    std::fprintf(stderr, "train: warning: --resume %s: passed over a newer checkpoint: %s\n", what.c_str(),
                 why.c_str());
  if (!passed_over.empty())
    std::fprintf(stderr, "train: warning: --resume %s: falling back to %s\n", what.c_str(), chosen.c_str());
}

RunCheckpoints::RunCheckpoints(const Flags& f, bool writer, Module& model, Optimizer& optimizer,
                               Trainer& trainer, int64_t micro_batches_per_epoch)
    : flags_(f),
      model_(model),
      optimizer_(optimizer),
      trainer_(trainer),
      every_(parse_save_every(f.save_every)) {
  if (!f.resume.empty()) resume_point_ = resume(f.resume, micro_batches_per_epoch, writer);
  if (!f.init_from.empty()) {
    load_model_weights(f.init_from, model);  // every rank: the same weights without a broadcast
    if (writer) std::printf("initial weights from %s\n", f.init_from.c_str());
  }
  const std::string dir = checkpoint_dir_of(f);
  if (!writer || dir.empty()) return;
  // A run resumed from a checkpoint without a run id (format 1) continues that run: its files are this run's.
  const bool adopt_unlabelled = !f.resume.empty() && run_id_.empty();
  manager_ = std::make_unique<CheckpointManager>(dir, f.keep, run_id_, adopt_unlabelled);
  if (!manager_->lock_note().empty())
    std::fprintf(stderr, "train: note: %s\n", manager_->lock_note().c_str());
  if (f.checkpoint_dir.empty())
    std::fprintf(stderr, "train: note: no --checkpoint-dir: checkpoints go on being saved in '%s'\n",
                 dir.c_str());
}

std::string RunCheckpoints::save(int64_t epoch, int64_t micro_batches_into_epoch) {
  if (!manager_) return "";
  CheckpointState st;
  capture_model(model_, flags_.model, st);
  capture_optimizer(optimizer_, st);
  for (const auto& [name, t] : trainer_.scaler().named_state()) st.extra.emplace_back("scaler." + name, t);
  if (trainer_.options().ema) capture_ema(*trainer_.options().ema, st);
  st.epoch = epoch;
  st.step = trainer_.global_step();
  st.batches_into_epoch = micro_batches_into_epoch;
  if (!flags_.stored_config.empty()) st.metadata["config"] = flags_.stored_config;
  if (!data_facts_.empty()) st.metadata["dataset"] = data_facts_;
  last_saved_ = manager_->save(st);
  return last_saved_;
}

ResumePoint RunCheckpoints::resume(const std::string& what, int64_t micro_batches_per_epoch, bool writer) {
  ResumePoint point;
  std::vector<std::string> passed_over;
  point.path = resolve_checkpoint(what, &passed_over);
  if (writer) print_passed_over(what, passed_over, point.path);
  const CheckpointState st = load_checkpoint(point.path);
  for (const std::string& warning : st.warnings) {
    if (writer) std::fprintf(stderr, "train: warning: %s\n", warning.c_str());
  }
  check_position(st, flags_, micro_batches_per_epoch);
  // The scaler's state is checked before anything is restored, like the model's and optimizer's.
  const NamedTensors scaler = trainer_.scaler().named_state();
  for (const auto& [name, t] : scaler) {
    const auto it = std::find_if(st.extra.begin(), st.extra.end(),
                                 [&](const auto& e) { return e.first == "scaler." + name; });
    LIFTOFF_CHECK(
        it == st.extra.end() || (it->second.shape() == t.shape() && it->second.dtype() == t.dtype()),
        ValueError, "--resume ", point.path, ": its loss scaler state 'scaler.", name, "' is ",
        dtype_name(it->second.dtype()), " ", shape_str(it->second.shape()), ", this run's is ",
        dtype_name(t.dtype()), " ", shape_str(t.shape()), "; was it written with another --amp?");
  }
  restore_ema(st, trainer_.options().ema);  // checked first: a run without --ema refuses an average
  restore_model(st, flags_.model, model_);
  restore_optimizer(st, optimizer_);
  for (const auto& [name, t] : scaler) {
    for (const auto& [saved_name, value] : st.extra) {
      if (saved_name == "scaler." + name) t.copy_(value);
    }
  }
  trainer_.set_global_step(st.step);
  run_id_ = st.run_id;
  point.step = st.step;
  point.epoch = st.epoch;
  point.skip_micro_batches = st.batches_into_epoch;
  if (point.skip_micro_batches >= micro_batches_per_epoch) {
    ++point.epoch;
    point.skip_micro_batches = 0;
  }
  return point;
}

}  // namespace liftoff::tools
