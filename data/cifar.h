// CIFAR-10 binary batches: each record is 1 label byte + 3072 pixel bytes (1024 R, 1024 G, 1024 B, row-major
// 32x32), so a file is a whole number of 3073-byte records. Files are untrusted: the size is checked before
// anything is read and every label must be < 10; failures are IOErrors naming the file.
#pragma once
#include <string>
#include <vector>

#include "data/dataset.h"

namespace liftoff {

constexpr int64_t kCifarRecordBytes = 3073;

// The records of several batch files, in order, as u8 [N, 3, 32, 32] with i64 labels. The name is `name`;
// mean/stddev are the published CIFAR-10 training statistics.
ImageDataset read_cifar10_files(const std::vector<std::string>& paths, const std::string& name);

// split "train": data_batch_1.bin .. data_batch_5.bin; "test": test_batch.bin. `dir` may be the folder
// holding the files or its parent (the archive's cifar-10-batches-bin/). Normalisation (0.4914, 0.4822,
// 0.4465) / (0.2470, 0.2435, 0.2616).
ImageDataset load_cifar10(const std::string& dir, const std::string& split = "train");

}  // namespace liftoff
