// Builds the training and evaluation loaders that `train` asks for with its flags.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "tools/train/flags.h"
#include "tools/train/skipped_files.h"

namespace liftoff::tools {

struct TrainData {
  std::unique_ptr<BatchSource> train;  // a DataLoader, or a DecodeLoader for --data folder with --decode
  std::unique_ptr<BatchSource> test;
  std::function<LoaderStats()> train_stats;  // the training loader's counters
  std::string augment;                       // for the run header and report
  std::string decode;                        // the decode pipeline's description ("" without it)
  std::string decode_where;  // who decodes the training files: gpu | cpu ("" for in-memory data)
  bool jpeg = false;         // the training files are mostly JPEGs
  std::function<std::string()> decode_summary;      // end-of-run decode route counts ("" without it)
  std::shared_ptr<const ImageFolder> train_folder;  // set for --data folder (skip counts live there)
  std::shared_ptr<const ImageFolder> test_folder;
  std::shared_ptr<SkippedFiles> skips;  // --data folder --on-bad-sample skip: what was left out, and why
  int64_t train_size = 0, test_size = 0;
  int64_t channels = 0, height = 0, width = 0, classes = 0;
  std::vector<float> mean, stddev;       // the training set's normalisation (per channel, pixel / 255)
  std::vector<std::string> class_names;  // folder names, the data set's names, or "0", "1", ...
};

// The facts a trained model needs to be used later (evaluate, predict): input channels/height/width, classes
// and their names, normalisation, as the JSON object train stores in each checkpoint's "dataset" metadata.
std::string data_facts_json(const TrainData& data);

// rank/world_size: each rank's shard of every epoch (training padded to equal shards, evaluation not).
TrainData make_train_data(const Flags& flags, Device device, int rank = 0, int world_size = 1);

}  // namespace liftoff::tools
