// NCCL is opened at run time like cuDNN; see nccl_loader.cpp (NCCL builds only).
#pragma once
#include <string>

namespace liftoff::distributed {

bool nccl_loaded();
// Empty when NCCL is loaded; otherwise what is missing and how to install it.
std::string nccl_load_error();

}  // namespace liftoff::distributed
