// GPU tests skip, with the reason, where no usable CUDA device exists.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "runtime/tensor.h"

namespace liftoff::testing {
// Empty when a CUDA device is usable; otherwise why not (built without CUDA, no driver, no device).
std::string cuda_unavailable_reason();
// A channels-last copy of the 4-D t on cuda:0 in dtype whose data starts `offset` elements into its storage
// (a view): offsets that break 16-byte alignment send kernels down their scalar paths.
Tensor channels_last_view(const Tensor& t, DType dtype, int64_t offset = 0);
}  // namespace liftoff::testing

#define LIFTOFF_REQUIRE_CUDA()                                                             \
  do {                                                                                     \
    const std::string liftoff_reason_ = ::liftoff::testing::cuda_unavailable_reason();     \
    if (!liftoff_reason_.empty()) GTEST_SKIP() << "needs a CUDA GPU: " << liftoff_reason_; \
  } while (0)
