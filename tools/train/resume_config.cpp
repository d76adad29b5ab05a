#include "tools/train/resume_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "models/train/checkpoint.h"
#include "models/train/safetensors.h"
#include "tools/common/cli.h"

namespace liftoff::tools {

namespace {

// What defines the training a checkpoint continues: changing one on --resume would train something else.
const std::set<std::string> kRunDefining = {
    "model",         "data",  "synthetic-size", "image-size", "batch",        "accum",           "seed",
    "optimizer",     "lr",    "momentum",       "nesterov",   "wd",           "schedule",        "warmup",
    "step-size",     "gamma", "augment",        "pad",        "random-erase", "label-smoothing", "amp",
    "deterministic", "ema",   "ema-buffers",    "lr-scale",   "drop-last"};
// The run's length: given again, the run is extended (or ends earlier), and the LR schedule spans the new
// total.
const std::set<std::string> kLength = {"epochs", "max-steps"};
// Chosen by each invocation, never taken from a checkpoint: `train --gpus N` spawns ranks without --gpus, and
// a resumed run saves where it resumed from unless --checkpoint-dir is given again (the checkpoint may have
// moved).
const std::set<std::string> kNotRestored = {"gpus", "checkpoint-dir"};

std::string old_name(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// The flags given on this command line (or its --config file), by long name.
std::map<std::string, std::string> given_flags(const CLI::App& app) {
  std::set<std::string> given;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() > 0 && !opt->get_lnames().empty()) given.insert(opt->get_lnames().front());
  }
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : flag_values(app)) {
    if (given.count(name)) out[name] = value;
  }
  return out;
}

// argv (without the program name) with --name=value added for every stored flag the command line leaves out.
std::vector<std::string> merged_arguments(const CLI::App& app, int argc, char** argv,
                                          const std::map<std::string, std::string>& stored,
                                          const std::map<std::string, std::string>& given) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& [name, value] : stored) {
    if (given.count(name) || kNotRestored.count(name)) continue;
    const CLI::Option* opt = app.get_option_no_throw("--" + name);
    if (opt == nullptr || !opt->get_configurable()) continue;  // a flag this build no longer has
    // This build's default already: nothing to restore (and flags that need another one, such as
    // --ema-buffers' --ema, stay unset with it).
    if (opt->count() == 0 && same_flag_value(value, opt->get_default_str())) continue;
    args.push_back("--" + name + "=" + value);
  }
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
  return args;
}

}  // namespace

std::map<std::string, std::string> parse_stored_config(const std::string& json, const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw IOError(
        str_cat("checkpoint '", path,
                "': its 'config' metadata is not a JSON object of flags; the checkpoint is damaged or "
                "was not written by train; resume from another one"));
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : j.items()) {
    const std::string name = old_name(key);
    if (value.is_string()) {
      out[name] = value.get<std::string>();
    } else if (value.is_boolean()) {
      out[name] = value.get<bool>() ? "true" : "false";
    } else if (value.is_number_integer()) {
      out[name] = std::to_string(value.get<int64_t>());
    } else if (value.is_number()) {
      // Older checkpoints wrote --lr's "auto" as -1.
      if (!(name == "lr" && value.get<double>() <= 0)) out[name] = value.dump();
    }
  }
  return out;
}

ResumedRun apply_resumed_config(CLI::App& app, Flags& f, int argc, char** argv) {
  ResumedRun run;
  const CheckpointCheck config_parses = [](const CheckpointState& st) {
    const auto it = st.metadata.find("config");
    if (it != st.metadata.end()) parse_stored_config(it->second, st.path);
  };
  run.checkpoint = resolve_checkpoint(f.resume, &run.passed_over, config_parses);
  const auto meta = read_safetensors_metadata(run.checkpoint);
  const auto config = meta.find("config");
  if (config == meta.end()) {
    f.resume = run.checkpoint;
    return run;  // written without its flags: nothing to restore or compare
  }
  const std::map<std::string, std::string> stored = parse_stored_config(config->second, run.checkpoint);
  const std::map<std::string, std::string> given = given_flags(app);

  app.clear();
  try {
    app.parse(merged_arguments(app, argc, argv, stored, given));
  } catch (const CLI::ParseError& e) {
    throw ValueError(str_cat("--resume ", run.checkpoint, ": the flags it stores do not parse here: ",
                             e.what(), "; give that flag on the command line"));
  }
  f.resume = run.checkpoint;

  std::string differ;
  for (const auto& [name, value] : given) {
    const auto it = stored.find(name);
    const CLI::Option* opt = app.get_option_no_throw("--" + name);
    // A run-defining flag the checkpoint does not list had no default to store (--lr: per optimizer).
    const bool absent_auto = it == stored.end() && opt != nullptr && opt->get_default_str().empty();
    if (it == stored.end() && !kRunDefining.count(name)) {
      run.notes.push_back(
          str_cat("--", name, " ", value, " is taken (the checkpoint records no value for it)"));
      continue;
    }
    if (it == stored.end() && !absent_auto) continue;  // an older checkpoint that did not record it
    const std::string before = it == stored.end() ? std::string("default") : it->second;
    if (it != stored.end() && same_flag_value(before, value)) continue;
    if (kRunDefining.count(name)) {
      differ += str_cat(differ.empty() ? "" : ", ", name, " (checkpoint ", before, ", now ", value, ")");
    } else {
      run.notes.push_back(str_cat("--", name, " ", value, " overrides the checkpoint's ", before,
                                  kLength.count(name) ? " (the run goes on to the new end; the LR schedule "
                                                        "spans the new total)"
                                                      : ""));
    }
  }
  LIFTOFF_CHECK(differ.empty(), ValueError, "--resume ", run.checkpoint,
                ": these flags differ from the checkpointed run and would change what it trains: ", differ,
                "; resume without them, or start a new run from its weights with --init-from ",
                run.checkpoint);
  return run;
}

}  // namespace liftoff::tools
