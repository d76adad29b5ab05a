// Internal (MPI builds only): <mpi.h> for the MPI process group, with MPI opened at run time; see
// mpi_loader.cpp. Include this instead of <mpi.h>.
#pragma once
#define OMPI_SKIP_MPICXX 1  // the C API only: the C++ bindings would need libmpi_cxx at link time
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <string>

namespace liftoff::distributed {

bool mpi_loaded();
// Empty when MPI is loaded; otherwise what is missing and how to install it.
std::string mpi_load_error();
// The address of one of MPI's predefined objects (Open MPI: MPI_COMM_WORLD is &ompi_mpi_comm_world).
void* mpi_predefined_object(const char* name);

}  // namespace liftoff::distributed

#ifdef OPEN_MPI
// Open MPI's handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are addresses of data in libmpi; linking them
// would make libmpi a NEEDED library again, so every handle macro looks its object up in the loaded library
// instead. (MPICH's handles are integer constants and need nothing.)
#undef OMPI_PREDEFINED_GLOBAL
#define OMPI_PREDEFINED_GLOBAL(type, global) \
  (static_cast<type>(::liftoff::distributed::mpi_predefined_object(#global)))
#endif
