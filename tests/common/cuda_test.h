// GPU tests skip, with the reason, where no usable CUDA device exists.
#pragma once
#include <gtest/gtest.h>

#include <string>

namespace liftoff::testing {
// Empty when a CUDA device is usable; otherwise why not (built without CUDA, no driver, no device).
std::string cuda_unavailable_reason();
}  // namespace liftoff::testing

#define LIFTOFF_REQUIRE_CUDA()                                                            \
  do {                                                                                    \
    const std::string liftoff_reason_ = ::liftoff::testing::cuda_unavailable_reason();    \
    if (!liftoff_reason_.empty()) GTEST_SKIP() << "needs a CUDA GPU: " << liftoff_reason_; \
  } while (0)
