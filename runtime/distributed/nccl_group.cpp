// The NCCL process group: one non-blocking communicator per process (one GPU per rank), collectives on the
// device's communication stream ordered against the compute stream with events, and a watchdog thread that
// turns a dead or hung peer into an aborted communicator and a clear error instead of a hang.
#include "runtime/distributed/nccl_group.h"

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>

#include "runtime/config.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/event.h"
#include "runtime/distributed/env.h"
#include "runtime/distributed/nccl_loader.h"
#include "runtime/error.h"
#include "runtime/graph.h"
#include "runtime/platform/thread_name.h"
#if LIFTOFF_WITH_MPI
#include "runtime/distributed/mpi_group.h"
#endif

namespace liftoff::cuda {

std::string nccl_error_string(int code) {
  std::string text = ncclGetErrorString(static_cast<ncclResult_t>(code));
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += std::string("; ") + last;
  return text;
}

}  // namespace liftoff::cuda

namespace liftoff::distributed {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// If a failure was reported but the caller never comes back to the group (blocked elsewhere), the process
// ends this long after the abort, with the message.
constexpr double kExitGraceSeconds = 15.0;

// ncclCommAbort waits for graphs that hold the communicator's captured work to be destroyed; if that never
// happens (the thread that owns them is stuck elsewhere), the process ends after the grace period with the
// reason instead of hanging.
void abort_within_grace(ncclComm_t comm, const std::string& reason) {
  auto returned = std::make_shared<std::atomic<bool>>(false);
  std::thread([returned, reason] {
    platform::set_current_thread_name("lo-nccl-abort");
    const auto start = Clock::now();
    while (!returned->load() && seconds_since(start) < kExitGraceSeconds)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (returned->load()) return;
    std::fprintf(stderr,
                 "liftoff: error: %s (the NCCL communicator could not be aborted within %.0f s; exiting)\n",
                 reason.c_str(), kExitGraceSeconds);
    std::fflush(stderr);
    std::_Exit(1);
  }).detach();
  ncclCommAbort(comm);
  returned->store(true);
}

std::string id_to_hex(const ncclUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * sizeof(id.internal));
  for (char c : id.internal) {
    const auto byte = static_cast<unsigned char>(c);
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  return hex;
}

ncclUniqueId id_from_hex(const std::string& hex, const char* source) {
  ncclUniqueId id{};
  LIFTOFF_CHECK(hex.size() == 2 * sizeof(id.internal), ValueError, "NCCL unique id from ", source, " has ",
                hex.size(), " characters; expected ", 2 * sizeof(id.internal), " hex digits");
  const auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw ValueError(str_cat("NCCL unique id from ", source, " contains '", c, "', not a hex digit"));
  };
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    id.internal[i] = static_cast<char>(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  }
  return id;
}

ncclUniqueId fresh_id() {
  ncclUniqueId id{};
  LIFTOFF_NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

// Rank 0 writes the id (to a temporary name, then rename: readers never see half a file); the others poll.
ncclUniqueId id_through_file(const std::string& path, int rank, double timeout) {
  if (rank == 0) {
    const ncclUniqueId id = fresh_id();
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << id_to_hex(id);
      LIFTOFF_CHECK(out.good(), IOError, "cannot write the NCCL unique id to ", tmp, " (", kNcclIdFileEnv,
                    ")");
    }
    LIFTOFF_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, IOError, "cannot rename ", tmp, " to ", path);
    return id;
  }
  const auto start = Clock::now();
  while (true) {
    std::ifstream in(path);
    std::string hex;
    if (in && (in >> hex) && hex.size() == 2 * sizeof(ncclUniqueId::internal))
      return id_from_hex(hex, path.c_str());
    LIFTOFF_CHECK(seconds_since(start) < timeout, BackendError, "rank ", rank,
                  ": rank 0 did not publish the NCCL ", "unique id in ", path, " within ", timeout,
                  " s (did rank 0 fail to start?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ncclUniqueId obtain_id(int rank, int world_size, const ProcessGroupOptions& options, double timeout) {
  if (!options.nccl_unique_id.empty()) return id_from_hex(options.nccl_unique_id, "ProcessGroupOptions");
  if (const auto hex = config::get_string(config::Knob::nccl_id)) return id_from_hex(*hex, kNcclIdEnv);
  if (const auto path = config::get_string(config::Knob::nccl_id_file)) {
    return id_through_file(*path, rank, timeout);
  }
#if LIFTOFF_WITH_MPI
  if (world_size > 1 && config::is_set(config::Knob::ompi_world_size)) {
    mpi_ensure_initialized(rank, world_size);
    std::string hex =
        rank == 0 ? id_to_hex(fresh_id()) : std::string(2 * sizeof(ncclUniqueId::internal), '0');
    mpi_broadcast_bytes(hex, 0, timeout);
    return id_from_hex(hex, "the MPI broadcast");
  }
#endif
  LIFTOFF_CHECK(world_size == 1, ValueError, "nccl process group of ", world_size,
                " ranks: no NCCL unique id; launch with `train --gpus N`, with mpirun (MPI build), or set ",
                kNcclIdEnv);
  return fresh_id();
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u8:
    case DType::b8:  // one byte, 0 or 1
      return ncclUint8;
  }
  throw DTypeError(str_cat("nccl: unsupported dtype ", dtype_name(dtype)));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
  }
  return ncclSum;
}

class NcclGroup;

class NcclWork : public Work {
 public:
  NcclWork(NcclGroup* group, int device, Tensor t, std::shared_ptr<cuda::Event> start,
           std::shared_ptr<cuda::Event> end, bool captured)
      : group_(group),
        device_(device),
        tensor_(std::move(t)),
        start_(std::move(start)),
        end_(std::move(end)),
        captured_(captured) {}
  ~NcclWork() override;
  void wait() override;
  // A captured collective's events were recorded into the graph (a query would be an error): it completes
  // with each replay, which the group watches as a whole.
  bool completed() override { return captured_ || end_->query(); }
  double elapsed_ms() override {
    if (captured_ || !end_->query()) return -1.0;
    return cuda::Event::elapsed_ms(*start_, *end_);
  }

 private:
  NcclGroup* group_;
  int device_;
  Tensor tensor_;  // kept alive until the compute stream is ordered after the collective
  std::shared_ptr<cuda::Event> start_, end_;
  bool captured_;
  bool waited_ = false;
};

class NcclGroup : public ProcessGroup {
 public:
  NcclGroup(int rank, int world_size, int device, ncclUniqueId id, double timeout)
      : ProcessGroup(rank, world_size), device_(device), timeout_(timeout) {
    cuda::DeviceGuard guard(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // set-up and enqueue return at once; we poll with a timeout instead of hanging
    LIFTOFF_NCCL_CHECK(ncclCommInitRankConfig(&comm_, world_size, id, rank, &config));
    const auto start = Clock::now();
    while (true) {
      ncclResult_t state = ncclSuccess;
      LIFTOFF_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
      if (state == ncclSuccess) break;
      if (state != ncclInProgress || seconds_since(start) > timeout_) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        LIFTOFF_CHECK(state != ncclInProgress, BackendError, "NCCL communicator set-up on rank ", rank,
                      " of ", world_size, " (cuda:", device_, ") did not finish within ", timeout_,
                      " s: not every rank joined (one died or was never started)");
        cuda::throw_backend_error("NCCL", "ncclCommInitRankConfig (asynchronous)", __FILE__, __LINE__, state,
                                  cuda::nccl_error_string(state));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    watchdog_ = std::thread([this] {
      platform::set_current_thread_name("lo-nccl-watch");
      watch();
    });
  }

  ~NcclGroup() override {
    {
      std::lock_guard<std::mutex> lock(watch_mutex_);
      stop_ = true;
    }
    watch_cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    std::lock_guard<std::mutex> lock(comm_mutex_);
    if (comm_ == nullptr) return;  // aborted: NCCL freed it
    if (std::uncaught_exceptions() > 0) {
      // Unwinding from an error: the peers may be inside a collective this rank will never join, and a
      // finalize or destroy would wait for them forever. Abort, so the error reaches the user and the rank
      // exits (the launcher or mpirun then stops the others).
      abort_within_grace(comm_, str_cat("rank ", rank_, " is unwinding from an error"));
      comm_ = nullptr;
      return;
    }
    try {
      cuda::DeviceGuard guard(device_);
      // Finalize flushes outstanding operations; a peer that died makes it hang, so poll with the timeout.
      ncclResult_t state = ncclCommFinalize(comm_);
      const auto start = Clock::now();
      while ((state == ncclSuccess || state == ncclInProgress) && seconds_since(start) < timeout_) {
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || state != ncclInProgress) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        abort_within_grace(comm_, str_cat("rank ", rank_, ": the NCCL communicator did not finalize"));
      }
    } catch (const std::exception&) {
      abort_within_grace(comm_, str_cat("rank ", rank_, ": the NCCL communicator did not finalize"));
    }
    comm_ = nullptr;
  }

  Backend backend() const override { return Backend::nccl; }
  Device device() const override { return Device::cuda(device_); }

  std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    const ncclDataType_t type = nccl_type(t.dtype());
    const ncclRedOp_t red = nccl_op(op);
    LIFTOFF_CHECK(op != ReduceOp::avg || is_floating(t.dtype()), DTypeError,
                  "nccl all_reduce: avg needs a floating-point tensor, got ", dtype_name(t.dtype()));
    auto work = enqueue("all_reduce", t, [&](ncclComm_t comm, cudaStream_t stream) {
      LIFTOFF_NCCL_CHECK(
          ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), type, red, comm, stream));
    });
    ++all_reduce_calls_;
    return work;
  }

  std::unique_ptr<Work> broadcast(const Tensor& t, int root) override {
    check_tensor("broadcast", t);
    LIFTOFF_CHECK(root >= 0 && root < world_size_, ValueError, "nccl broadcast: root ", root,
                  " is outside [0, ", world_size_, ")");
    const ncclDataType_t type = nccl_type(t.dtype());
    auto work = enqueue("broadcast", t, [&](ncclComm_t comm, cudaStream_t stream) {
      LIFTOFF_NCCL_CHECK(ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), type, root,
                                       comm, stream));
    });
    ++broadcast_calls_;
    return work;
  }

  void check_healthy() override { throw_if_failed(); }

  void barrier() override {
    if (!barrier_buffer_.defined()) barrier_buffer_ = Tensor::zeros({1}, DType::i32, device());
    auto work = all_reduce(barrier_buffer_, ReduceOp::sum);
    --all_reduce_calls_;  // a barrier is not a gradient all-reduce
    // A host wait, polled so the watchdog's verdict can interrupt it.
    while (!work->completed()) {
      throw_if_failed();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    work->wait();
  }

  void watch_graph_replay(const char* what) override {
    throw_if_failed();
    cuda::DeviceGuard guard(device_);
    auto done = std::make_shared<cuda::Event>(false);
    done->record(cuda::compute_stream(device_));
    std::lock_guard<std::mutex> lock(watch_mutex_);
    pending_.push_back({std::move(done), Clock::now(), what});
  }

  // Throws the watchdog's verdict, if any (every entry point calls this first).
  void throw_if_failed() {
    if (!failed_.load()) return;
    std::lock_guard<std::mutex> lock(failure_mutex_);
    failure_consumed_ = true;
    throw BackendError(failure_);
  }

 private:
  template <class Call>
  std::unique_ptr<Work> enqueue(const char* what, const Tensor& t, Call&& call) {
    throw_if_failed();
    cuda::DeviceGuard guard(device_);
    const cudaStream_t compute = cuda::compute_stream(device_);
    const cudaStream_t comm = cuda::comm_stream(device_);
    if (graph_capture_active()) {
      // A capture already invalidated would make NCCL's launch fail and leave that as the communicator's
      // error (read by the watchdog as a dead peer): fail the capture instead, which falls back to eager.
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      const cudaError_t query = cudaStreamIsCapturing(compute, &status);
      if (query != cudaSuccess) cudaGetLastError();
      if (query != cudaSuccess || status != cudaStreamCaptureStatusActive) {
        throw GraphCaptureError(str_cat("NCCL ", what, ": the CUDA graph capture on cuda:", device_,
                                        " was invalidated before the collective"));
      }
    }
    // The collective reads what the compute stream wrote so far: the comm stream waits for it (device-side).
    cuda::Event ready;
    ready.record(compute);
    ready.wait(comm);
    auto start = std::make_shared<cuda::Event>(true);
    auto end = std::make_shared<cuda::Event>(true);
    start->record(comm);
    {
      std::lock_guard<std::mutex> lock(comm_mutex_);
      throw_if_failed();
      call(comm_, comm);
      wait_enqueued(what);
    }
    end->record(comm);
    const bool captured = graph_capture_active();
    if (!captured) {  // a captured collective is watched through its graph's replays
      std::lock_guard<std::mutex> lock(watch_mutex_);
      pending_.push_back({end, Clock::now(), what});
    }
    return std::make_unique<NcclWork>(this, device_, t, std::move(start), std::move(end), captured);
  }

  // Non-blocking communicators may still be enqueueing when the call returns; NCCL needs that finished before
  // the next call. Called with comm_mutex_ held.
  void wait_enqueued(const char* what) {
    const auto start = Clock::now();
    while (true) {
      ncclResult_t state = ncclSuccess;
      LIFTOFF_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        cuda::throw_backend_error("NCCL", what, __FILE__, __LINE__, state, cuda::nccl_error_string(state));
      }
      LIFTOFF_CHECK(seconds_since(start) < timeout_, BackendError, "NCCL ", what, " on rank ", rank_,
                    " could not be enqueued within ", timeout_, " s");
      std::this_thread::yield();
    }
  }

  void watch() {
    try {
      LIFTOFF_CUDA_CHECK(cudaSetDevice(device_));
    } catch (const std::exception& e) {
      fail(str_cat("NCCL watchdog on rank ", rank_, " cannot use cuda:", device_, ": ", e.what()));
      return;
    }
    std::unique_lock<std::mutex> lock(watch_mutex_);
    while (!stop_) {
      watch_cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (stop_) break;
      std::string verdict;
      try {
        while (!pending_.empty() && pending_.front().done->query()) {
          pending_.pop_front();
          // The next one's clock starts now at the latest: work queued far ahead (graph replays) is not
          // late just because it waited behind earlier work.
          if (!pending_.empty()) pending_.front().issued = std::max(pending_.front().issued, Clock::now());
        }
      } catch (const std::exception& e) {
        verdict = str_cat("CUDA error while watching NCCL collectives on rank ", rank_, ": ", e.what());
      }
      if (verdict.empty() && !pending_.empty() && seconds_since(pending_.front().issued) > timeout_) {
        verdict =
            str_cat("NCCL ", pending_.front().what, " on rank ", rank_, " of ", world_size_,
                    " (cuda:", device_, ") did not complete within ", timeout_,
                    " s: another rank has died or hung; communicator aborted (LIFTOFF_DIST_TIMEOUT sets "
                    "the limit)");
      }
      if (verdict.empty()) {
        std::unique_lock<std::mutex> comm_lock(comm_mutex_, std::try_to_lock);
        if (comm_lock.owns_lock() && comm_ != nullptr) {
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess &&
              state != ncclInProgress) {
            verdict = str_cat("NCCL reported an asynchronous error on rank ", rank_, " of ", world_size_,
                              " (cuda:", device_, "): ", cuda::nccl_error_string(state),
                              "; a peer rank has probably died; communicator aborted");
          }
        }
      }
      if (!verdict.empty()) {
        lock.unlock();
        fail(verdict);
        lock.lock();
        // The caller normally sees the error at its next call; if it never comes back, end the process.
        const auto failed_at = Clock::now();
        while (!stop_ && seconds_since(failed_at) < kExitGraceSeconds) {
          watch_cv_.wait_for(lock, std::chrono::milliseconds(100));
          std::lock_guard<std::mutex> failure_lock(failure_mutex_);
          if (failure_consumed_) break;
        }
        bool consumed = false;
        {
          std::lock_guard<std::mutex> failure_lock(failure_mutex_);
          consumed = failure_consumed_;
        }
        if (!stop_ && !consumed) {
          std::fprintf(stderr,
                       "liftoff: error: %s (the training thread did not return within %.0f s; exiting)\n",
                       verdict.c_str(), kExitGraceSeconds);
          std::fflush(stderr);
          std::_Exit(1);
        }
        return;
      }
    }
  }

  void fail(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      failure_ = reason;
    }
    failed_.store(true);
    // ncclCommAbort makes the in-flight kernels return, which unblocks host waits on the streams.
    std::lock_guard<std::mutex> lock(comm_mutex_);
    if (comm_ != nullptr) {
      abort_within_grace(comm_, reason);
      comm_ = nullptr;
    }
  }

  struct Pending {
    std::shared_ptr<cuda::Event> done;
    Clock::time_point issued;
    std::string what;
  };

  int device_;
  double timeout_;
  ncclComm_t comm_ = nullptr;
  std::mutex comm_mutex_;  // serialises NCCL calls on comm_ between the caller and the watchdog
  Tensor barrier_buffer_;

  std::mutex watch_mutex_;
  std::condition_variable watch_cv_;
  std::deque<Pending> pending_;
  bool stop_ = false;
  std::thread watchdog_;

  std::atomic<bool> failed_{false};
  std::mutex failure_mutex_;
  std::string failure_;
  bool failure_consumed_ = false;
};

NcclWork::~NcclWork() {
  // Captured: the graph orders its own streams, or the capture was abandoned and nothing ran.
  if (waited_ || captured_) return;
  try {
    // Dropped without wait(): still order the compute stream after the collective (device-side) so the
    // tensor's memory is not reused under it.
    cuda::DeviceGuard guard(device_);
    end_->wait(cuda::compute_stream(device_));
  } catch (const std::exception&) {
    // Device failure: nothing better to do in a destructor.
  }
}

void NcclWork::wait() {
  group_->throw_if_failed();
  cuda::DeviceGuard guard(device_);
  end_->wait(cuda::compute_stream(device_));
  waited_ = true;
}

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_group(int rank, int world_size, const ProcessGroupOptions& options) {
  const double timeout = effective_timeout_seconds(options);
  LIFTOFF_CHECK(nccl_loaded(), BackendError, "nccl process group: ", nccl_load_error());
  const int visible = cuda::device_count();
  LIFTOFF_CHECK(visible > 0, DeviceError, "nccl process group: no CUDA device is usable on this machine");
  int device = options.cuda_device;
  if (device < 0) device = discover_env().local_rank;
  LIFTOFF_CHECK(device < visible, DeviceError, "nccl process group: rank ", rank, " wants cuda:", device,
                " but only ", visible, " GPU(s) are visible; start at most ", visible, " processes per node");
  const ncclUniqueId id = obtain_id(rank, world_size, options, timeout);
  return std::make_unique<NcclGroup>(rank, world_size, device, id, timeout);
}

}  // namespace liftoff::distributed
