// IDX files (the MNIST / Fashion-MNIST format), read straight from .gz with zlib; an uncompressed file works
// too. The file is untrusted: the header (magic, dimension count, sizes) is validated and the payload size
// checked against the file size before anything is allocated, and the payload must be exactly as long as the
// header says. Every failure is an IOError with one line: the path, what is wrong (expected vs found) and a
// hint.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/tensor.h"

namespace liftoff {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // u8, 3 dimensions: count, rows, cols
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // u8, 1 dimension: count

struct IdxLimits {
  int64_t max_count = 100000000;  // items (images or labels)
  int64_t max_side = 4096;        // rows and cols
};

// u8 [count, rows, cols] on the CPU.
Tensor read_idx_images(const std::string& path, const IdxLimits& limits = {});
// u8 [count] on the CPU.
Tensor read_idx_labels(const std::string& path, const IdxLimits& limits = {});

}  // namespace liftoff
