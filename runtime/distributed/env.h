// Where this process sits in a distributed job, read from the launcher's environment: RANK / WORLD_SIZE /
// LOCAL_RANK (`train --gpus N`, torchrun-style launchers) or OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK
// (mpirun). No variables: a single process (rank 0 of 1).
#pragma once
#include <string>

namespace liftoff::distributed {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // Processes of this job on this machine (LOCAL_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_SIZE; else world_size,
  // i.e. one node): they share its cores.
  int local_world_size = 1;
  // "env" (RANK/WORLD_SIZE), "train --gpus", "mpirun" (OMPI_COMM_WORLD_*), or "none".
  std::string launcher = "none";
  bool distributed() const { return world_size > 1; }
};

// Reads and checks the variables; throws ValueError naming the variable when one is malformed or out of
// range (a rank outside [0, world size), a world size below 1, WORLD_SIZE without RANK, ...).
DistEnv discover_env();

// Set by the local launcher: the file through which rank 0 hands the NCCL unique id to the other ranks.
constexpr const char* kNcclIdFileEnv = "LIFTOFF_NCCL_ID_FILE";
// Alternatively the NCCL unique id itself, 256 hex characters.
constexpr const char* kNcclIdEnv = "LIFTOFF_NCCL_ID";

}  // namespace liftoff::distributed
