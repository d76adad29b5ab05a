#include "data/cifar.h"

#include <cstring>
#include <filesystem>
#include <fstream>

namespace liftoff {

namespace {
constexpr int64_t kCifarPixels = 3 * 32 * 32;
// 60000 records is the whole set; anything far beyond is not CIFAR-10 and would only waste memory.
constexpr int64_t kMaxRecords = 10000000;
}  // namespace

ImageDataset read_cifar10_files(const std::vector<std::string>& paths, const std::string& name) {
  LIFTOFF_CHECK(!paths.empty(), ValueError, "CIFAR-10: no batch files given");
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const std::string& path : paths) {
    std::error_code ec;
    LIFTOFF_CHECK(std::filesystem::is_regular_file(path, ec), IOError, "CIFAR-10 file '", path,
                  "' not found; download the binary version (cifar-10-binary.tar.gz) and pass its folder");
    const uintmax_t size = std::filesystem::file_size(path, ec);
    LIFTOFF_CHECK(!ec, IOError, "CIFAR-10 file '", path, "': cannot read its size: ", ec.message());
    LIFTOFF_CHECK(size > 0 && size % kCifarRecordBytes == 0, IOError, "CIFAR-10 file '", path, "': size ",
                  size, " bytes is not a positive multiple of ", kCifarRecordBytes,
                  " (1 label byte + 3072 pixel bytes per record); the file is truncated or not a CIFAR-10 "
                  "binary batch");
    const int64_t n = static_cast<int64_t>(size / kCifarRecordBytes);
    LIFTOFF_CHECK(total + n <= kMaxRecords, IOError, "CIFAR-10 file '", path, "': ", total + n,
                  " records in all exceed the limit of ", kMaxRecords);
    counts.push_back(n);
    total += n;
  }
  ImageDataset ds;
  ds.name = name;
  ds.num_classes = 10;
  ds.images = Tensor::empty({total, 3, 32, 32}, DType::u8, Device::cpu());
  ds.labels = Tensor::empty({total}, DType::i64, Device::cpu());
  uint8_t* images = ds.images.data<uint8_t>();
  int64_t* labels = ds.labels.data<int64_t>();
  std::vector<char> record(static_cast<size_t>(kCifarRecordBytes));
  int64_t row = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    std::ifstream in(paths[f], std::ios::binary);
    LIFTOFF_CHECK(in.good(), IOError, "CIFAR-10 file '", paths[f], "': cannot open it for reading");
    for (int64_t r = 0; r < counts[f]; ++r, ++row) {
      in.read(record.data(), kCifarRecordBytes);
      LIFTOFF_CHECK(in.gcount() == kCifarRecordBytes, IOError, "CIFAR-10 file '", paths[f],
                    "': short read at record ", r, " (the file changed while reading?)");
      const auto label = static_cast<uint8_t>(record[0]);
      LIFTOFF_CHECK(label < 10, IOError, "CIFAR-10 file '", paths[f], "': record ", r, " has label ",
                    static_cast<int>(label), ", expected 0..9; the file is corrupt or not CIFAR-10");
      labels[row] = label;
      std::memcpy(images + row * kCifarPixels, record.data() + 1, static_cast<size_t>(kCifarPixels));
    }
  }
  ds.mean = {0.4914f, 0.4822f, 0.4465f};
  ds.stddev = {0.2470f, 0.2435f, 0.2616f};
  return ds;
}

ImageDataset load_cifar10(const std::string& dir, const std::string& split) {
  LIFTOFF_CHECK(split == "train" || split == "test", ValueError, "CIFAR-10: split '", split,
                "' is not train or test");
  std::error_code ec;
  std::string base = dir;
  const std::string nested = (std::filesystem::path(dir) / "cifar-10-batches-bin").string();
  if (!std::filesystem::exists(std::filesystem::path(dir) / "test_batch.bin", ec) &&
      std::filesystem::is_directory(nested, ec)) {
    base = nested;
  }
  std::vector<std::string> paths;
  if (split == "train") {
    for (int i = 1; i <= 5; ++i) {
      paths.push_back((std::filesystem::path(base) / ("data_batch_" + std::to_string(i) + ".bin")).string());
    }
  } else {
    paths.push_back((std::filesystem::path(base) / "test_batch.bin").string());
  }
  return read_cifar10_files(paths, "cifar10/" + split);
}

}  // namespace liftoff
