#include "tools/train/checkpointing.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace liftoff::tools {

std::string run_defining_config(const Flags& f) {
  nlohmann::json j;
  j["model"] = f.model;
  j["data"] = f.data;
  j["batch"] = f.batch;
  j["accum"] = f.accum;
  j["seed"] = f.seed;
  j["optimizer"] = f.optimizer;
  j["lr"] = f.lr;
  j["momentum"] = f.momentum;
  j["nesterov"] = f.nesterov;
  j["wd"] = f.wd;
  j["schedule"] = f.schedule;
  j["warmup"] = f.warmup;
  j["epochs"] = f.epochs;
  j["max_steps"] = f.max_steps;
  j["drop_last"] = f.drop_last;
  j["augment"] = f.augment;
  j["pad"] = f.pad;
  j["random_erase"] = f.random_erase;
  j["label_smoothing"] = f.label_smoothing;
  j["amp"] = f.amp;
  j["deterministic"] = f.deterministic;
  return j.dump();
}

namespace {

namespace fs = std::filesystem;

// The "config" metadata (the flags of the run that wrote it): a JSON object, or the checkpoint is rejected
// (and --resume DIR falls back to an older one).
nlohmann::json saved_config(const CheckpointState& st) {
  const auto it = st.metadata.find("config");
  if (it == st.metadata.end()) return nlohmann::json::object();
  nlohmann::json saved = nlohmann::json::parse(it->second, nullptr, false);
  if (saved.is_discarded() || !saved.is_object()) {
    throw IOError(
        str_cat("checkpoint '", st.path,
                "': its 'config' metadata is not a JSON object of flags; the checkpoint is damaged or "
                "was not written by train; resume from another one"));
  }
  return saved;
}

// Counters that must fit this run: an epoch beyond --epochs, or more micro-batches into the epoch than an
// epoch has, means another data set or batch size.
void check_position(const CheckpointState& st, const Flags& f, int64_t micro_batches_per_epoch) {
  LIFTOFF_CHECK(st.epoch <= f.epochs, ValueError, "--resume ", st.path, ": it is at epoch ", st.epoch + 1,
                " but this run has --epochs ", f.epochs, "; resume with the same flags");
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

RunCheckpoints::RunCheckpoints(const Flags& f, bool writer, Module& model, Optimizer& optimizer,
                               Trainer& trainer, int64_t micro_batches_per_epoch)
    : flags_(f),
      model_(model),
      optimizer_(optimizer),
      trainer_(trainer),
      every_(parse_save_every(f.save_every)) {
  if (!f.resume.empty()) resume_point_ = resume(f.resume, micro_batches_per_epoch, writer);
  const std::string dir = checkpoint_dir_of(f);
  if (!writer || dir.empty()) return;
  manager_ = std::make_unique<CheckpointManager>(dir, f.keep, run_id_);
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
  st.epoch = epoch;
  st.step = trainer_.global_step();
  st.batches_into_epoch = micro_batches_into_epoch;
  st.metadata["config"] = run_defining_config(flags_);
  last_saved_ = manager_->save(st);
  return last_saved_;
}

ResumePoint RunCheckpoints::resume(const std::string& what, int64_t micro_batches_per_epoch, bool writer) {
  ResumePoint point;
  std::vector<std::string> passed_over;
  point.path = resolve_checkpoint(what, &passed_over, [](const CheckpointState& st) { saved_config(st); });
  for (const std::string& why : passed_over) {
    if (writer)
      std::fprintf(stderr, "train: warning: --resume %s: passed over a newer checkpoint: %s\n", what.c_str(),
                   why.c_str());
  }
  if (writer && !passed_over.empty())
    std::fprintf(stderr, "train: warning: --resume %s: falling back to %s\n", what.c_str(),
                 point.path.c_str());
  const CheckpointState st = load_checkpoint(point.path);
  const nlohmann::json saved = saved_config(st);
  if (!saved.empty()) {
    const nlohmann::json now = nlohmann::json::parse(run_defining_config(flags_));
    std::string differ;
    for (const auto& [key, value] : now.items()) {
      if (!saved.contains(key) || saved[key] != value) {
        differ += (differ.empty() ? "" : ", ") + key + " (checkpoint " +
                  (saved.contains(key) ? saved[key].dump() : std::string("-")) + ", now " + value.dump() +
                  ")";
      }
    }
    LIFTOFF_CHECK(differ.empty(), ValueError, "--resume ", point.path,
                  ": these flags differ from the checkpointed run: ", differ, "; resume with the same flags");
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
