// MPI is loaded at run time (dlopen) rather than linked, like cuDNN (runtime/cuda/cudnn_loader.cpp): a
// program that embeds Liftoff starts where MPI is not installed, and only an mpi process group (or NCCL's id
// exchange under mpirun) asks for it. The library must be the MPI whose mpi.h the build used (the handles'
// ABI), so the default names are Open MPI's. Each MPI function Liftoff calls is defined here with mpi.h's
// signature and forwards to the library.
#include "runtime/distributed/mpi_loader.h"

#include "runtime/config.h"
#include "runtime/platform/dynamic_library.h"

namespace liftoff::distributed {

namespace {
platform::RuntimeLibrary& mpi_library() {
  static auto* lib = new platform::RuntimeLibrary(
      {"MPI (libmpi.so.40, Open MPI)",
       {"libmpi.so.40", "libmpi.so"},
       "install Open MPI (Debian: openmpi-bin libopenmpi3) or add its lib folder to LD_LIBRARY_PATH (or name "
       "the "
       "file in LIFTOFF_MPI_LIBRARY)",
       config::get_string(config::Knob::mpi_library),
       /*global=*/true});  // Open MPI's plugins resolve libmpi's symbols from the global scope
  return *lib;
}
}  // namespace

bool mpi_loaded() {
  return mpi_library().loaded();
}

std::string mpi_load_error() {
  return mpi_library().load_error();
}

void* mpi_predefined_object(const char* name) {
  return mpi_library().require(name);
}

template <class Fn>
Fn mpi_function(const char* name) {
  return reinterpret_cast<Fn>(mpi_library().require(name));
}

}  // namespace liftoff::distributed

#define LIFTOFF_MPI_FORWARD(name, params, args)                                        \
  int name params {                                                                    \
    static const auto fn = ::liftoff::distributed::mpi_function<int(*) params>(#name); \
    return fn args;                                                                    \
  }

extern "C" {

LIFTOFF_MPI_FORWARD(MPI_Initialized, (int* flag), (flag))
LIFTOFF_MPI_FORWARD(MPI_Init_thread, (int* argc, char*** argv, int required, int* provided),
                    (argc, argv, required, provided))
LIFTOFF_MPI_FORWARD(MPI_Finalized, (int* flag), (flag))
LIFTOFF_MPI_FORWARD(MPI_Finalize, (void), ())
LIFTOFF_MPI_FORWARD(MPI_Error_string, (int errorcode, char* string, int* resultlen),
                    (errorcode, string, resultlen))
LIFTOFF_MPI_FORWARD(MPI_Comm_rank, (MPI_Comm comm, int* rank), (comm, rank))
LIFTOFF_MPI_FORWARD(MPI_Comm_size, (MPI_Comm comm, int* size), (comm, size))
LIFTOFF_MPI_FORWARD(MPI_Comm_dup, (MPI_Comm comm, MPI_Comm* newcomm), (comm, newcomm))
LIFTOFF_MPI_FORWARD(MPI_Comm_free, (MPI_Comm * comm), (comm))
LIFTOFF_MPI_FORWARD(MPI_Comm_set_errhandler, (MPI_Comm comm, MPI_Errhandler errhandler), (comm, errhandler))
LIFTOFF_MPI_FORWARD(MPI_Test, (MPI_Request * request, int* flag, MPI_Status* status), (request, flag, status))
LIFTOFF_MPI_FORWARD(MPI_Ibarrier, (MPI_Comm comm, MPI_Request* request), (comm, request))
LIFTOFF_MPI_FORWARD(MPI_Ibcast,
                    (void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                     MPI_Request* request),
                    (buffer, count, datatype, root, comm, request))
LIFTOFF_MPI_FORWARD(MPI_Op_create, (MPI_User_function * function, int commute, MPI_Op* op),
                    (function, commute, op))
LIFTOFF_MPI_FORWARD(MPI_Op_free, (MPI_Op * op), (op))
LIFTOFF_MPI_FORWARD(MPI_Iallreduce,
                    (const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                     MPI_Comm comm, MPI_Request* request),
                    (sendbuf, recvbuf, count, datatype, op, comm, request))

}  // extern "C"
