// A checkpoint of `train`, used after training (the evaluate and predict tools): the run's flags as train
// parsed them (its stored "config"), the data facts it stored ("dataset"), and its model with the weights
// restored.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/module.h"
#include "models/train/checkpoint.h"
#include "runtime/device.h"
#include "tools/train/data_setup.h"
#include "tools/train/flags.h"

namespace liftoff::tools {

struct DataFacts {
  int64_t channels = 0, height = 0, width = 0, classes = 0;
  std::vector<std::string> class_names;
  std::vector<float> mean, stddev;
};
DataFacts facts_of(const TrainData& data);

struct TrainedCheckpoint {
  CheckpointState state;  // validated (load_checkpoint); state.warnings for the user
  Flags flags;            // train's flags of the run, with the caller's overrides
  bool has_facts = false;
  DataFacts facts;  // from the "dataset" metadata (checkpoints of older builds have none)
};

// Reads `file_or_dir` (a directory: its latest valid checkpoint) and parses its stored flags with train's
// flag definitions, then `overrides` ({"--data-dir", "DIR", ...}, as on a command line). A checkpoint without
// stored flags gives train's defaults plus its model name. Throws IOError / ValueError naming the file.
TrainedCheckpoint read_trained_checkpoint(const std::string& file_or_dir,
                                          const std::map<std::string, std::string>& overrides);

// Which of a checkpoint's weights a tool uses: automatic takes the EMA of the weights where the checkpoint
// holds one (what train's evaluations scored), else the last step's; ema insists on the average (ValueError
// naming the file when there is none); model takes the last step's.
enum class WeightsChoice { automatic, ema, model };
// "auto" | "ema" | "model" (ValueError otherwise).
WeightsChoice parse_weights_choice(const std::string& text);

struct TrainedModel {
  std::unique_ptr<Module> model;  // on the device, in eval mode
  bool ema_weights = false;       // it holds the checkpoint's EMA average
  std::string weights;  // for the user: "EMA of the weights (decay 0.99)" or "the last step's weights"
};

// The checkpoint's model for these data facts, with the chosen weights (restore_model's and restore_ema's
// checks), on `device`, in eval mode.
TrainedModel build_trained_model(const TrainedCheckpoint& ckpt, const DataFacts& facts, Device device,
                                 WeightsChoice weights = WeightsChoice::automatic);

}  // namespace liftoff::tools
