// NCCL is loaded at run time (dlopen) rather than linked, like cuDNN (runtime/cuda/cudnn_loader.cpp): a
// program that embeds Liftoff starts where NCCL is not installed, and only a nccl process group asks for it
// (make_nccl_group checks nccl_loaded() first and throws what to install). Each NCCL function Liftoff calls
// is defined here with nccl.h's signature and forwards to the library.
#include <nccl.h>

#include <string>

#include "runtime/config.h"
#include "runtime/distributed/nccl_loader.h"
#include "runtime/platform/dynamic_library.h"

namespace liftoff::distributed {

namespace {
platform::RuntimeLibrary& nccl_library() {
  static auto* lib = new platform::RuntimeLibrary(
      {"NCCL " + std::to_string(NCCL_MAJOR) + " (libnccl.so." + std::to_string(NCCL_MAJOR) + ")",
       {"libnccl.so." + std::to_string(NCCL_MAJOR), "libnccl.so"},
       "install NCCL " + std::to_string(NCCL_MAJOR) +
           " (NVIDIA package libnccl2) or add its lib folder to LD_LIBRARY_PATH (or name the file in "
           "LIFTOFF_NCCL_LIBRARY)",
       config::get_string(config::Knob::nccl_library)});
  return *lib;
}
}  // namespace

bool nccl_loaded() {
  return nccl_library().loaded();
}

std::string nccl_load_error() {
  return nccl_library().load_error();
}

template <class Fn>
Fn nccl_function(const char* name) {
  return reinterpret_cast<Fn>(nccl_library().require(name));
}

}  // namespace liftoff::distributed

#define LIFTOFF_NCCL_FORWARD(result, name, params, args)                                   \
  result name params {                                                                     \
    static const auto fn = ::liftoff::distributed::nccl_function<result(*) params>(#name); \
    return fn args;                                                                        \
  }

extern "C" {

// Error texts are asked for while reporting another error: they answer instead of throwing.
const char* ncclGetErrorString(ncclResult_t result) {
  if (!::liftoff::distributed::nccl_loaded()) return "NCCL is not loaded";
  static const auto fn =
      ::liftoff::distributed::nccl_function<const char* (*)(ncclResult_t)>("ncclGetErrorString");
  return fn(result);
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (!::liftoff::distributed::nccl_loaded()) return "";
  static const auto fn =
      ::liftoff::distributed::nccl_function<const char* (*)(ncclComm_t)>("ncclGetLastError");
  return fn(comm);
}

LIFTOFF_NCCL_FORWARD(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId), (uniqueId))
LIFTOFF_NCCL_FORWARD(ncclResult_t, ncclCommInitRankConfig,
                     (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config),
                     (comm, nranks, commId, rank, config))
LIFTOFF_NCCL_FORWARD(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError),
                     (comm, asyncError))
LIFTOFF_NCCL_FORWARD(ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm))
LIFTOFF_NCCL_FORWARD(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
LIFTOFF_NCCL_FORWARD(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
LIFTOFF_NCCL_FORWARD(ncclResult_t, ncclBroadcast,
                     (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                      ncclComm_t comm, cudaStream_t stream),
                     (sendbuff, recvbuff, count, datatype, root, comm, stream))
LIFTOFF_NCCL_FORWARD(ncclResult_t, ncclAllReduce,
                     (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
                     (sendbuff, recvbuff, count, datatype, op, comm, stream))

}  // extern "C"
