// The MPI process group: CPU tensors, non-blocking MPI collectives on a private duplicate of MPI_COMM_WORLD,
// waits polled with a timeout so a dead or hung peer becomes a BackendError instead of a hang.
#include "runtime/distributed/mpi_group.h"

#include "runtime/distributed/mpi_loader.h"  // <mpi.h>, with MPI opened at run time

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "runtime/error.h"
#include "runtime/half.h"

namespace liftoff::distributed {

namespace {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "unknown MPI error";
  return std::string(text, static_cast<size_t>(length));
}

[[noreturn]] void throw_mpi_error(const char* statement, const char* file, int line, int code) {
  throw BackendError(str_cat("MPI error ", code, " (", mpi_error_string(code), ") in `", statement, "` at ",
                             file, ":", line));
}

}  // namespace
}  // namespace liftoff::distributed

// Same shape as the CUDA/NCCL family in runtime/cuda/check.h: names the call, file:line and MPI's message.
#define LIFTOFF_MPI_CHECK(stmt)                                                                \
  do {                                                                                         \
    const int liftoff_mpi_status_ = (stmt);                                                    \
    if (liftoff_mpi_status_ != MPI_SUCCESS)                                                    \
      ::liftoff::distributed::throw_mpi_error(#stmt, __FILE__, __LINE__, liftoff_mpi_status_); \
  } while (0)

namespace liftoff::distributed {

namespace {

using Clock = std::chrono::steady_clock;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MPI_Datatype mpi_type(DType dtype, const char* what) {
  switch (dtype) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
      return MPI_UINT8_T;
    default:
      break;
  }
  throw DTypeError(
      str_cat("mpi ", what, ": ", dtype_name(dtype),
              " tensors are not supported by MPI (f32, f64, i32, i64, u8 are); keep CPU gradients in "
              "f32 (master weights)"));
}

// MPI has no 16-bit float types: they travel as MPI_UINT16_T, and their sums and maxima (DDP's bf16
// compressed gradients) go through f32 per element, as NCCL's do.
template <class T, bool kMax>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const T*>(in);
  auto* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    b[i] = T(kMax ? (x != x || x > y ? x : y) : x + y);  // a NaN wins whatever the order
  }
}

// Divides each element by `world` (ReduceOp::avg: MPI has only the sum). 16-bit floats are divided before
// the sum, as NCCL's average does (a loss-scaled f16 sum could overflow before the division).
template <class T>
void divide_16bit(const Tensor& t, int world) {
  T* p = static_cast<T*>(t.raw_data());
  const float inv = 1.0f / static_cast<float>(world);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(static_cast<float>(p[i]) * inv);
}

bool is_16bit_float(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16;
}

// Set once a collective timed out: later waits fail at once instead of waiting out the timeout again.
std::atomic<bool> g_failed{false};
std::string g_failure;  // written once, before g_failed is set

// Polls `request` until done; throws after `timeout` seconds naming the collective and the rank.
void wait_request(MPI_Request& request, double timeout, const std::string& what, int rank, int world) {
  if (g_failed.load()) throw BackendError(g_failure);
  const auto start = Clock::now();
  int done = 0;
  for (int spins = 0;; ++spins) {
    LIFTOFF_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > timeout) {
      const std::string peer =
          world == 2 ? str_cat("rank ", 1 - rank, " (the other rank)") : std::string("another rank");
      g_failure =
          str_cat(what, " did not complete within ", timeout, " s: ", peer,
                  " has died or hung (mpirun names a rank that exited); LIFTOFF_DIST_TIMEOUT sets the limit");
      g_failed.store(true);
      throw BackendError(g_failure);
    }
    // Spin briefly (collectives are usually quick), then stop burning a core.
    if (spins > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class MpiWork : public Work {
 public:
  MpiWork(std::string what, Tensor t, bool divide, int rank, int world, double timeout)
      : what_(std::move(what)),
        tensor_(std::move(t)),
        divide_(divide),
        rank_(rank),
        world_(world),
        timeout_(timeout) {}
  ~MpiWork() override {
    // Keeps the buffer alive and quiet until MPI is done with it (after a timeout the process is ending).
    if (g_failed.load()) return;
    try {
      wait();
    } catch (const std::exception&) {
      // A dead peer: the error surfaces at the next explicit wait; nothing better to do in a destructor.
    }
  }
  MPI_Request* request() { return &request_; }

  void wait() override {
    if (finished_) return;
    if (!done_) wait_request(request_, timeout_, what_, rank_, world_);
    done_ = true;
    finished_ = true;
    if (divide_ && world_ > 1) {
      const int64_t n = tensor_.numel();
      if (tensor_.dtype() == DType::f32) {
        float* p = tensor_.data<float>();
        const float inv = 1.0f / static_cast<float>(world_);
        for (int64_t i = 0; i < n; ++i) p[i] *= inv;
      } else {
        double* p = tensor_.data<double>();
        const double inv = 1.0 / static_cast<double>(world_);
        for (int64_t i = 0; i < n; ++i) p[i] *= inv;
      }
    }
  }
  bool completed() override {
    if (done_) return true;
    int flag = 0;
    LIFTOFF_MPI_CHECK(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
    done_ = flag != 0;
    return done_;
  }

 private:
  std::string what_;
  Tensor tensor_;
  bool divide_;
  int rank_, world_;
  double timeout_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false, finished_ = false;
};

class MpiGroup : public ProcessGroup {
 public:
  MpiGroup(int rank, int world_size, double timeout) : ProcessGroup(rank, world_size), timeout_(timeout) {
    mpi_ensure_initialized(rank, world_size);
    // A private communicator: the user's own MPI traffic never matches ours.
    LIFTOFF_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    LIFTOFF_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    LIFTOFF_MPI_CHECK(MPI_Op_create(&reduce_16bit<BFloat16, false>, 1, &bf16_sum_));
    LIFTOFF_MPI_CHECK(MPI_Op_create(&reduce_16bit<BFloat16, true>, 1, &bf16_max_));
    LIFTOFF_MPI_CHECK(MPI_Op_create(&reduce_16bit<Half, false>, 1, &f16_sum_));
    LIFTOFF_MPI_CHECK(MPI_Op_create(&reduce_16bit<Half, true>, 1, &f16_max_));
  }
  ~MpiGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (MPI_Op* op : {&bf16_sum_, &bf16_max_, &f16_sum_, &f16_max_}) {
      if (*op != MPI_OP_NULL) MPI_Op_free(op);
    }
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  Backend backend() const override { return Backend::mpi; }
  Device device() const override { return Device::cpu(); }

  std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    const bool half = is_16bit_float(t.dtype());
    const MPI_Datatype type = half ? MPI_UINT16_T : mpi_type(t.dtype(), "all_reduce");
    const bool divide = op == ReduceOp::avg;
    LIFTOFF_CHECK(!divide || half || t.dtype() == DType::f32 || t.dtype() == DType::f64, DTypeError,
                  "mpi all_reduce: avg needs a floating-point tensor (f32, f64, bf16, f16), got ",
                  dtype_name(t.dtype()));
    MPI_Op mpi_op = op == ReduceOp::max ? MPI_MAX : MPI_SUM;
    if (t.dtype() == DType::bf16) mpi_op = op == ReduceOp::max ? bf16_max_ : bf16_sum_;
    if (t.dtype() == DType::f16) mpi_op = op == ReduceOp::max ? f16_max_ : f16_sum_;
    if (divide && half && world_size_ > 1) {  // divided before the sum (divide_16bit)
      if (t.dtype() == DType::bf16) divide_16bit<BFloat16>(t, world_size_);
      if (t.dtype() == DType::f16) divide_16bit<Half>(t, world_size_);
    }
    auto work =
        std::make_unique<MpiWork>(what("all_reduce"), t, divide && !half, rank_, world_size_, timeout_);
    LIFTOFF_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(count(t)), type, mpi_op,
                                     comm_, work->request()));
    ++all_reduce_calls_;
    return work;
  }

  std::unique_ptr<Work> broadcast(const Tensor& t, int root) override {
    check_tensor("broadcast", t);
    LIFTOFF_CHECK(root >= 0 && root < world_size_, ValueError, "mpi broadcast: root ", root,
                  " is outside [0, ", world_size_, ")");
    const MPI_Datatype type = is_16bit_float(t.dtype()) ? MPI_UINT16_T : mpi_type(t.dtype(), "broadcast");
    auto work = std::make_unique<MpiWork>(what("broadcast"), t, false, rank_, world_size_, timeout_);
    LIFTOFF_MPI_CHECK(
        MPI_Ibcast(t.raw_data(), static_cast<int>(count(t)), type, root, comm_, work->request()));
    ++broadcast_calls_;
    return work;
  }

  void barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    LIFTOFF_MPI_CHECK(MPI_Ibarrier(comm_, &request));
    wait_request(request, timeout_, what("barrier"), rank_, world_size_);
  }

 private:
  std::string what(const char* op) const {
    return str_cat("mpi ", op, " on rank ", rank_, " of ", world_size_);
  }
  static int64_t count(const Tensor& t) {
    LIFTOFF_CHECK(t.numel() < (int64_t{1} << 31), ValueError, "mpi: tensor of ", t.numel(),
                  " elements exceeds MPI's int count; use smaller buckets");
    return t.numel();
  }

  double timeout_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Op bf16_sum_ = MPI_OP_NULL, bf16_max_ = MPI_OP_NULL, f16_sum_ = MPI_OP_NULL, f16_max_ = MPI_OP_NULL;
};

}  // namespace

void mpi_ensure_initialized(int rank, int world_size) {
  LIFTOFF_CHECK(mpi_loaded(), BackendError, "MPI: ", mpi_load_error());
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    LIFTOFF_MPI_CHECK(MPI_Initialized(&initialized));
    if (!initialized) {
      int provided = 0;
      // Collectives are issued from one thread at a time (the training thread).
      LIFTOFF_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
      std::atexit(finalize_at_exit);
    }
  });
  int mpi_rank = 0, mpi_size = 0;
  LIFTOFF_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank));
  LIFTOFF_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &mpi_size));
  LIFTOFF_CHECK(mpi_rank == rank && mpi_size == world_size, BackendError, "MPI_COMM_WORLD has rank ",
                mpi_rank, " of ", mpi_size, " but the process group was asked for rank ", rank, " of ",
                world_size, "; launch with mpirun -np ", world_size,
                " (or leave RANK/WORLD_SIZE unset under mpirun)");
}

void mpi_broadcast_bytes(std::string& bytes, int root, double timeout_seconds) {
  MPI_Request request = MPI_REQUEST_NULL;
  LIFTOFF_MPI_CHECK(
      MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, MPI_COMM_WORLD, &request));
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  wait_request(request, timeout_seconds, "MPI broadcast of the NCCL unique id", rank, size);
}

std::unique_ptr<ProcessGroup> make_mpi_group(int rank, int world_size, const ProcessGroupOptions& options) {
  LIFTOFF_CHECK(mpi_loaded(), BackendError, "mpi process group: ", mpi_load_error());
  return std::make_unique<MpiGroup>(rank, world_size, effective_timeout_seconds(options));
}

}  // namespace liftoff::distributed
