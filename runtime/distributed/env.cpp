#include "runtime/distributed/env.h"

#include "runtime/config.h"
#include "runtime/error.h"

namespace liftoff::distributed {

namespace {
using config::Knob;

// -1 when unset; the table checks the value (an integer in [0, 2^24)) and names the variable when it is not.
long read_int(Knob knob) {
  return static_cast<long>(config::get_int(knob).value_or(-1));
}

DistEnv read_triple(Knob rank_knob, Knob world_knob, Knob local_knob, Knob local_size_knob,
                    const std::string& launcher) {
  const char* rank_var = config::name(rank_knob);
  const char* world_var = config::name(world_knob);
  const char* local_var = config::name(local_knob);
  const char* local_size_var = config::name(local_size_knob);
  const long rank = read_int(rank_knob);
  const long world = read_int(world_knob);
  LIFTOFF_CHECK(rank >= 0 && world >= 0, ValueError, "environment: ", rank_var, " and ", world_var,
                " must be set together (got ", rank_var, rank >= 0 ? " set" : " unset", ", ", world_var,
                world >= 0 ? " set" : " unset", ")");
  LIFTOFF_CHECK(world >= 1, ValueError, "environment: ", world_var, "=", world, " must be at least 1");
  LIFTOFF_CHECK(rank < world, ValueError, "environment: ", rank_var, "=", rank, " is outside [0, ", world_var,
                "=", world, ")");
  const long local = read_int(local_knob);
  LIFTOFF_CHECK(local < world, ValueError, "environment: ", local_var, "=", local, " is not below ",
                world_var, "=", world);
  DistEnv env;
  env.rank = static_cast<int>(rank);
  env.world_size = static_cast<int>(world);
  // Without a local rank, assume one node: local rank = rank.
  env.local_rank = static_cast<int>(local >= 0 ? local : rank);
  const long local_size = read_int(local_size_knob);
  LIFTOFF_CHECK(local_size < 0 || (local_size >= 1 && local_size <= world && env.local_rank < local_size),
                ValueError, "environment: ", local_size_var, "=", local_size, " must be in [1, ", world_var,
                "=", world, "] and above the local rank ", env.local_rank);
  env.local_world_size = static_cast<int>(local_size >= 1 ? local_size : world);
  env.launcher = launcher;
  return env;
}
}  // namespace

DistEnv discover_env() {
  if (config::is_set(Knob::rank) || config::is_set(Knob::world_size)) {
    // A launcher may name itself (`train --gpus N` does); otherwise "env" (torchrun-style variables).
    return read_triple(Knob::rank, Knob::world_size, Knob::local_rank, Knob::local_world_size,
                       config::get_string(Knob::launcher).value_or("env"));
  }
  if (config::is_set(Knob::ompi_rank) || config::is_set(Knob::ompi_world_size)) {
    return read_triple(Knob::ompi_rank, Knob::ompi_world_size, Knob::ompi_local_rank, Knob::ompi_local_size,
                       "mpirun");
  }
  return DistEnv{};
}

}  // namespace liftoff::distributed
