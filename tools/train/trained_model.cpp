#include "tools/train/trained_model.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "models/nn/zoo.h"
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

std::unique_ptr<Module> build_trained_model(const TrainedCheckpoint& ckpt, const DataFacts& facts,
                                            Device device) {
  std::unique_ptr<Module> model =
      make_model(ckpt.flags.model, facts.channels, facts.classes, facts.height, ckpt.flags.seed);
  restore_model(ckpt.state, ckpt.flags.model, *model);
  model->to(device);
  model->eval();
  return model;
}

}  // namespace liftoff::tools
