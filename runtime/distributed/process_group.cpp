#include "runtime/distributed/process_group.h"

#include "runtime/config.h"
#include "runtime/error.h"
#if LIFTOFF_WITH_NCCL
#include "runtime/distributed/nccl_group.h"
#endif
#if LIFTOFF_WITH_MPI
#include "runtime/distributed/mpi_group.h"
#endif

namespace liftoff::distributed {

Work::~Work() = default;
ProcessGroup::~ProcessGroup() = default;

Backend parse_backend(const std::string& text) {
  if (text == "nccl") return Backend::nccl;
  if (text == "mpi") return Backend::mpi;
  throw ValueError(str_cat("unknown distributed backend '", text, "'; expected nccl or mpi"));
}

const char* backend_name(Backend backend) {
  return backend == Backend::nccl ? "nccl" : "mpi";
}

bool backend_built(Backend backend) {
  if (backend == Backend::nccl) return LIFTOFF_WITH_NCCL != 0;
  return LIFTOFF_WITH_MPI != 0;
}

Backend backend_for(Device device) {
  return device.is_cuda() ? Backend::nccl : Backend::mpi;
}

std::string ProcessGroup::describe() const {
  return str_cat(backend_name(backend()), ", ", world_size_, world_size_ == 1 ? " rank" : " ranks",
                 ", this rank ", rank_, " on ", device().str());
}

void ProcessGroup::check_tensor(const char* what, const Tensor& t) const {
  LIFTOFF_CHECK(t.defined(), ValueError, backend_name(backend()), " ", what, ": undefined tensor");
  LIFTOFF_CHECK(t.device() == device(), DeviceError, backend_name(backend()), " ", what, ": tensor on ",
                t.device().str(), " but this process group works on ", device().str());
  LIFTOFF_CHECK(t.is_contiguous(), ValueError, backend_name(backend()), " ", what, ": tensor ",
                shape_str(t.shape()), " must be contiguous");
}

double effective_timeout_seconds(const ProcessGroupOptions& options) {
  const double timeout = config::get_double(config::Knob::dist_timeout).value_or(options.timeout_seconds);
  LIFTOFF_CHECK(timeout > 0, ValueError, "process group timeout must be positive, got ", timeout, " s");
  return timeout;
}

std::unique_ptr<ProcessGroup> make_process_group(Backend backend, int rank, int world_size,
                                                 const ProcessGroupOptions& options) {
  LIFTOFF_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, ValueError, "make_process_group: rank ",
                rank, " is outside [0, world size ", world_size, ")");
  if (backend == Backend::nccl) {
#if LIFTOFF_WITH_NCCL
    return make_nccl_group(rank, world_size, options);
#else
    throw ValueError(
        "the nccl process group is not built: this Liftoff was built without NCCL (it needs CUDA and nccl.h "
        "/ "
        "libnccl under the CUDA toolkit; configure with -DLIFTOFF_NCCL=ON to make that an error)");
#endif
  }
#if LIFTOFF_WITH_MPI
  return make_mpi_group(rank, world_size, options);
#else
  (void)options;
  throw ValueError(
      "the mpi process group is not built: this Liftoff was built without MPI (install libopenmpi-dev and "
      "openmpi-bin, then reconfigure; -DLIFTOFF_MPI=ON makes a missing MPI an error)");
#endif
}

}  // namespace liftoff::distributed
