#include "tools/train/trained_model.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "models/nn/zoo.h"
#include "models/train/ema.h"
#include "tools/train/resume_config.h"

namespace liftoff::tools {

namespace {

// The "dataset" metadata (data_facts_json); false when absent. Throws IOError naming the file when damaged.
bool parse_facts(const CheckpointState& st, DataFacts& out) {
  const auto it = st.metadata.find("dataset");
  if (it == st.metadata.end()) return false;
  const nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
  try {
    out.channels = j.at("channels").get<int64_t>();
    out.height = j.at("height").get<int64_t>();
    out.width = j.at("width").get<int64_t>();
    out.classes = j.at("classes").get<int64_t>();
    out.class_names = j.at("class_names").get<std::vector<std::string>>();
    out.mean = j.at("mean").get<std::vector<float>>();
    out.stddev = j.at("stddev").get<std::vector<float>>();
  } catch (const nlohmann::json::exception&) {
    throw IOError(
        str_cat("checkpoint '", st.path,
                "': its 'dataset' metadata is not the object train writes (channels, height, width, "
                "classes, class_names, mean, stddev); the checkpoint is damaged"));
  }
  const auto channels = static_cast<size_t>(out.channels);
  if (out.channels < 1 || out.height < 1 || out.width < 1 || out.classes < 2 ||
      out.class_names.size() != static_cast<size_t>(out.classes) || out.mean.size() != channels ||
      out.stddev.size() != channels) {
    throw IOError(
        str_cat("checkpoint '", st.path, "': its 'dataset' metadata is inconsistent: ", it->second));
  }
  return true;
}

}  // namespace

DataFacts facts_of(const TrainData& data) {
  return {data.channels, data.height, data.width, data.classes, data.class_names, data.mean, data.stddev};
}

TrainedCheckpoint read_trained_checkpoint(const std::string& file_or_dir,
                                          const std::map<std::string, std::string>& overrides) {
  TrainedCheckpoint out;
  out.state = load_checkpoint(resolve_checkpoint(file_or_dir));
  std::map<std::string, std::string> values;
  const auto config = out.state.metadata.find("config");
  if (config != out.state.metadata.end()) {
    values = parse_stored_config(config->second, out.state.path);
  } else if (!out.state.model_name.empty()) {
    values["model"] = out.state.model_name;
  }
  for (const auto& [name, value] : overrides) values[name] = value;
  std::vector<std::string> args;
  for (const auto& [name, value] : values) args.push_back("--" + name + "=" + value);
  CLI::App app{"checkpoint flags", "train"};
  add_flags(app, out.flags);
  app.final_callback([] {});  // train's run checks (output paths writable, ...) are not this tool's concern
  app.allow_extras();         // nor a flag of a newer build
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw ValueError(str_cat("checkpoint '", out.state.path,
                             "': its flags (with the ones given here) do not parse: ", e.what()));
  }
  out.has_facts = parse_facts(out.state, out.facts);
  return out;
}

WeightsChoice parse_weights_choice(const std::string& text) {
  if (text == "auto") return WeightsChoice::automatic;
  if (text == "ema") return WeightsChoice::ema;
  if (text == "model") return WeightsChoice::model;
  throw ValueError(str_cat("--weights: '", text, "' is not one of auto, ema, model"));
}

TrainedModel build_trained_model(const TrainedCheckpoint& ckpt, const DataFacts& facts, Device device,
                                 WeightsChoice weights) {
  TrainedModel out;
  out.model = make_model(ckpt.flags.model, facts.channels, facts.classes, facts.height, ckpt.flags.seed);
  restore_model(ckpt.state, ckpt.flags.model, *out.model);
  out.model->to(device);
  out.model->eval();
  const bool has_ema = holds_ema(ckpt.state);
  LIFTOFF_CHECK(has_ema || weights != WeightsChoice::ema, ValueError, "--weights ema: checkpoint '",
                ckpt.state.path, "' holds no EMA of the weights (its run had no --ema); use --weights model");
  out.weights = "the last step's weights";
  if (!has_ema || weights == WeightsChoice::model) return out;
  // The average goes into the model's own tensors (restore_ema checks every name, shape and dtype first).
  const double decay = ckpt.flags.ema >= 0 ? ckpt.flags.ema : EmaOptions{}.decay;
  // A checkpoint without stored flags shows --ema-buffers average only by its entries.
  ModelEma ema(*out.model,
               {decay, ckpt.flags.ema_buffers == "average" || holds_buffer_averages(ckpt.state, *out.model)});
  restore_ema(ckpt.state, &ema);
  ema.swap_with_model();
  out.ema_weights = true;
  out.weights =
      ckpt.flags.ema >= 0 ? str_cat("EMA of the weights (decay ", ckpt.flags.ema, ")") : "EMA of the weights";
  return out;
}

}  // namespace liftoff::tools
