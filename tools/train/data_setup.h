// Builds the training and evaluation loaders that `train` asks for with its flags.
#pragma once
#include <memory>
#include <string>

#include "data/loader.h"
#include "tools/train/flags.h"

namespace liftoff::tools {

struct TrainData {
  std::unique_ptr<DataLoader> train;
  std::unique_ptr<DataLoader> test;
  std::shared_ptr<const ImageFolder> train_folder;  // set for --data folder (skip counts live there)
  std::shared_ptr<const ImageFolder> test_folder;
  int64_t train_size = 0, test_size = 0;
  int64_t channels = 0, height = 0, width = 0, classes = 0;
};

// rank/world_size: each rank's shard of every epoch (training padded to equal shards, evaluation not).
TrainData make_train_data(const Flags& flags, Device device, int rank = 0, int world_size = 1);

}  // namespace liftoff::tools
