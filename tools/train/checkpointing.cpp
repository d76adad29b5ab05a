#include "tools/train/checkpointing.h"

#include <nlohmann/json.hpp>

#include <cstdlib>

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
  j["augment"] = f.augment;
  j["pad"] = f.pad;
  j["random_erase"] = f.random_erase;
  j["label_smoothing"] = f.label_smoothing;
  j["amp"] = f.amp;
  j["deterministic"] = f.deterministic;
  return j.dump();
}

RunCheckpoints::RunCheckpoints(const Flags& f, Module& model, Optimizer& optimizer, Trainer& trainer)
    : flags_(f), model_(model), optimizer_(optimizer), trainer_(trainer) {
  if (f.checkpoint_dir.empty()) return;
  manager_ = std::make_unique<CheckpointManager>(f.checkpoint_dir, f.keep);
  const std::string& every = f.save_every;
  if (every.empty() || every == "0") return;
  const bool epochs = every.back() == 'e';
  const std::string digits = epochs ? every.substr(0, every.size() - 1) : every;
  char* end = nullptr;
  const long long n = std::strtoll(digits.c_str(), &end, 10);
  LIFTOFF_CHECK(!digits.empty() && *end == '\0' && n > 0, ValueError, "--save-every '", every,
                "': expected N optimizer steps or Ne epochs (e.g. 500 or 1e)");
  (epochs ? every_epochs_ : every_steps_) = n;
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

ResumePoint RunCheckpoints::resume(const std::string& what, int64_t micro_batches_per_epoch) {
  ResumePoint point;
  point.path = resolve_checkpoint(what);
  const CheckpointState st = load_checkpoint(point.path);
  const auto config = st.metadata.find("config");
  if (config != st.metadata.end()) {
    const nlohmann::json saved = nlohmann::json::parse(config->second);
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
  restore_model(st, flags_.model, model_);
  restore_optimizer(st, optimizer_);
  for (const auto& [name, t] : trainer_.scaler().named_state()) {
    for (const auto& [saved_name, saved] : st.extra) {
      if (saved_name == "scaler." + name) t.copy_(saved);
    }
  }
  trainer_.set_global_step(st.step);
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
