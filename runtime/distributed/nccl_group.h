// Internal: the NCCL process group's factory (runtime/distributed/nccl_group.cpp, NCCL builds only).
#pragma once
#include <memory>

#include "runtime/distributed/process_group.h"

namespace liftoff::distributed {

std::unique_ptr<ProcessGroup> make_nccl_group(int rank, int world_size, const ProcessGroupOptions& options);

}  // namespace liftoff::distributed
