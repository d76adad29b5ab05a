// Internal: the MPI process group's factory and the MPI helpers the NCCL group uses under mpirun
// (runtime/distributed/mpi_group.cpp, MPI builds only).
#pragma once
#include <memory>
#include <string>

#include "runtime/distributed/process_group.h"

namespace liftoff::distributed {

std::unique_ptr<ProcessGroup> make_mpi_group(int rank, int world_size, const ProcessGroupOptions& options);

// Initialises MPI once per process (MPI_Finalize runs at exit) and checks that MPI_COMM_WORLD has the given
// rank and size; throws BackendError naming the mismatch.
void mpi_ensure_initialized(int rank, int world_size);
// Broadcasts `bytes` (same length on every rank) from root over MPI_COMM_WORLD, with the timeout.
void mpi_broadcast_bytes(std::string& bytes, int root, double timeout_seconds);

}  // namespace liftoff::distributed
