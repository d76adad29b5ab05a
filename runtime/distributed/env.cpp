#include "runtime/distributed/env.h"

#include <cerrno>
#include <cstdlib>

#include "runtime/error.h"

namespace liftoff::distributed {

namespace {
// -1 when unset; throws when set but not a non-negative integer.
long read_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return -1;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  LIFTOFF_CHECK(errno == 0 && end != text && *end == '\0' && value >= 0 && value < (1L << 24), ValueError,
                "environment variable ", name, "='", text, "' is not a non-negative integer");
  return value;
}

DistEnv read_triple(const char* rank_var, const char* world_var, const char* local_var,
                    const char* local_size_var, const char* launcher) {
  const long rank = read_int(rank_var);
  const long world = read_int(world_var);
  LIFTOFF_CHECK(rank >= 0 && world >= 0, ValueError, "environment: ", rank_var, " and ", world_var,
                " must be set together (got ", rank_var, rank >= 0 ? " set" : " unset", ", ", world_var,
                world >= 0 ? " set" : " unset", ")");
  LIFTOFF_CHECK(world >= 1, ValueError, "environment: ", world_var, "=", world, " must be at least 1");
  LIFTOFF_CHECK(rank < world, ValueError, "environment: ", rank_var, "=", rank, " is outside [0, ", world_var,
                "=", world, ")");
  const long local = read_int(local_var);
  LIFTOFF_CHECK(local < world, ValueError, "environment: ", local_var, "=", local, " is not below ",
                world_var, "=", world);
  DistEnv env;
  env.rank = static_cast<int>(rank);
  env.world_size = static_cast<int>(world);
  // Without a local rank, assume one node: local rank = rank.
  env.local_rank = static_cast<int>(local >= 0 ? local : rank);
  const long local_size = read_int(local_size_var);
  LIFTOFF_CHECK(local_size < 0 || (local_size >= 1 && local_size <= world && env.local_rank < local_size),
                ValueError, "environment: ", local_size_var, "=", local_size, " must be in [1, ", world_var,
                "=", world, "] and above the local rank ", env.local_rank);
  env.local_world_size = static_cast<int>(local_size >= 1 ? local_size : world);
  env.launcher = launcher;
  return env;
}
}  // namespace

DistEnv discover_env() {
  if (std::getenv("RANK") != nullptr || std::getenv("WORLD_SIZE") != nullptr) {
    // A launcher may name itself (`train --gpus N` does); otherwise "env" (torchrun-style variables).
    const char* named = std::getenv("LIFTOFF_LAUNCHER");
    return read_triple("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                       named != nullptr && *named != '\0' ? named : "env");
  }
  if (std::getenv("OMPI_COMM_WORLD_RANK") != nullptr || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
    return read_triple("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                       "OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun");
  }
  return DistEnv{};
}

}  // namespace liftoff::distributed
