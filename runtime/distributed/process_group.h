// Process groups: the collectives DDP needs (all_reduce, broadcast, barrier) over NCCL (CUDA tensors) or MPI
// (CPU tensors). The engines do the communication; this layer checks arguments, orders streams and guards
// against hangs.
//
// CUDA (NCCL): collectives run on the device's communication stream. all_reduce/broadcast first make the comm
// stream wait for the work queued so far on the compute stream (an event, no host wait), then enqueue the
// NCCL call; Work::wait() makes the compute stream wait for the collective (again device-side). Nothing here
// reads a device value on the host. A watchdog thread aborts the communicator (ncclCommAbort) when a
// collective has not completed within the timeout or NCCL reports an asynchronous error (a peer died), and
// the next call on the group throws BackendError with that reason; if the caller never comes back to the
// group, the watchdog ends the process with the message (never a hang).
//
// CUDA graphs: a collective issued while the calling thread captures a graph (runtime/graph.h) is recorded
// into the graph instead of running; its Work orders the capture's streams like any other, but it has no
// timing and counts as completed (it runs, and completes, with every replay). The caller reports each
// replay with watch_graph_replay() so the watchdog still sees a collective that never completes.
//
// CPU (MPI): non-blocking MPI collectives (MPI_Iallreduce ...); Work::wait() blocks the host (this is the
// CPU: the host is the device) and polls with the same timeout, then throws BackendError.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/device.h"
#include "runtime/tensor.h"

namespace liftoff::distributed {

enum class Backend { nccl, mpi };
// "nccl" or "mpi"; throws ValueError otherwise.
Backend parse_backend(const std::string& text);
const char* backend_name(Backend backend);
// True when this build carries the backend (NCCL needs CUDA; both are optional at build time).
bool backend_built(Backend backend);
// The backend for tensors on `device`: nccl for CUDA, mpi for the CPU.
Backend backend_for(Device device);

enum class ReduceOp { sum, avg, max };

// A collective in flight. Destroying a Work that was never waited for still orders the device correctly
// (the compute stream waits for it), so buffers are never reused under a running collective.
class Work {
 public:
  virtual ~Work();
  // CUDA: the compute stream of the group's device waits for the collective (no host wait).
  // CPU: blocks until done (with the group's timeout), then finishes the op (avg divides by the world size).
  virtual void wait() = 0;
  // Never blocks: true when the collective has completed (CUDA: its end event; CPU: MPI_Test).
  virtual bool completed() = 0;
  // Device time of the collective in ms once completed (CUDA timing events on the comm stream); negative when
  // not measured or not completed yet. Never blocks.
  virtual double elapsed_ms() { return -1.0; }
};

struct ProcessGroupOptions {
  // A collective (or communicator set-up) not done after this many seconds is treated as a dead or hung peer.
  // LIFTOFF_DIST_TIMEOUT (seconds) overrides it when set.
  double timeout_seconds = 45.0;
  // NCCL: the device of this rank; default cuda:<local rank> (LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_RANK).
  int cuda_device = -1;
  // NCCL unique id as 256 hex characters. Empty: LIFTOFF_NCCL_ID (hex), then LIFTOFF_NCCL_ID_FILE (rank 0
  // writes a fresh id there, the others read it: what `train --gpus N` sets up), then a broadcast over MPI
  // when launched by mpirun, then (world size 1) a fresh id.
  std::string nccl_unique_id;
};

class ProcessGroup {
 public:
  ProcessGroup(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  virtual Backend backend() const = 0;
  // Where the group's tensors live: cuda:N for NCCL, cpu for MPI.
  virtual Device device() const = 0;
  // A one-line description for logs: "nccl, 2 ranks, this rank 0 on cuda:0".
  std::string describe() const;

  // In place, on every rank, on a contiguous tensor of device(). avg: sum / world_size.
  virtual std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op = ReduceOp::avg) = 0;
  // In place: every rank gets root's values.
  virtual std::unique_ptr<Work> broadcast(const Tensor& t, int root = 0) = 0;
  // Blocks the host until every rank arrived (outside training steps: start-up, evaluation, shutdown).
  virtual void barrier() = 0;
  // Throws BackendError when the group has failed (a dead or hung peer found by the watchdog); cheap, no
  // communication. Call before launching work that holds this group's collectives (a graph replay).
  virtual void check_healthy() {}
  // After launching a CUDA graph that holds this group's collectives: the watchdog times the replay like a
  // collective (`what` names it in the error). MPI groups have nothing to watch.
  virtual void watch_graph_replay(const char* what) { (void)what; }

  // Collectives issued from the host so far (all_reduce, broadcast, barrier), for tests and the report. A
  // collective captured in a CUDA graph counts once, not per replay (DDPStats counts replays).
  int64_t all_reduce_calls() const { return all_reduce_calls_; }
  int64_t broadcast_calls() const { return broadcast_calls_; }

 protected:
  // Common argument checks; throws naming the collective, the tensor and the group's device.
  void check_tensor(const char* what, const Tensor& t) const;

  int rank_, world_size_;
  int64_t all_reduce_calls_ = 0;
  int64_t broadcast_calls_ = 0;
};

// Creates the group of `world_size` ranks in which this process is `rank`. Blocks until every rank joined
// (or the timeout passed: BackendError). Throws ValueError/BackendError with a hint when the backend is not
// built or the arguments are wrong.
std::unique_ptr<ProcessGroup> make_process_group(Backend backend, int rank, int world_size,
                                                 const ProcessGroupOptions& options = {});

// The effective timeout: options.timeout_seconds unless LIFTOFF_DIST_TIMEOUT is set (checked: a positive
// number of seconds).
double effective_timeout_seconds(const ProcessGroupOptions& options);

}  // namespace liftoff::distributed
