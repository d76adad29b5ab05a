# Distributed backends: NCCL (CUDA tensors) and MPI (CPU tensors, and the NCCL unique id under mpirun).
# LIFTOFF_NCCL / LIFTOFF_MPI: AUTO (used when found), ON (FATAL_ERROR when missing), OFF.
# Sets LIFTOFF_WITH_NCCL / LIFTOFF_WITH_MPI; liftoff_add_distributed_sources(target) adds the sources, links and
# compile definitions (called from runtime/CMakeLists.txt once the library target exists).
set(LIFTOFF_NCCL AUTO CACHE STRING "Build the NCCL process group: AUTO (when found with CUDA), ON (required) or OFF")
set_property(CACHE LIFTOFF_NCCL PROPERTY STRINGS AUTO ON OFF)
set(LIFTOFF_MPI AUTO CACHE STRING "Build the MPI process group: AUTO (when found), ON (required) or OFF")
set_property(CACHE LIFTOFF_MPI PROPERTY STRINGS AUTO ON OFF)

set(LIFTOFF_WITH_NCCL OFF)
if(NOT LIFTOFF_NCCL STREQUAL "OFF")
  if(LIFTOFF_WITH_CUDA)
    # NCCL ships inside the CUDA toolkit on our machines; NCCL_ROOT points elsewhere. Only its header is needed
    # here: libnccl is opened at run time (runtime/distributed/nccl_loader.cpp).
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
              ${CUDAToolkit_LIBRARY_ROOT} PATH_SUFFIXES include)
    if(NCCL_INCLUDE_DIR)
      file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h nccl_version_line REGEX "^#define NCCL_VERSION_CODE +[0-9]+")
      string(REGEX REPLACE "^#define NCCL_VERSION_CODE +([0-9]+).*" "\\1" NCCL_VERSION_CODE "${nccl_version_line}")
      # Non-blocking communicators and ncclAvg need NCCL >= 2.14.
      if(NCCL_VERSION_CODE GREATER_EQUAL 21400)
        set(LIFTOFF_WITH_NCCL ON)
      else()
        set(nccl_problem "NCCL ${NCCL_VERSION_CODE} at ${NCCL_INCLUDE_DIR} is older than 2.14")
      endif()
    else()
      set(nccl_problem "nccl.h not found under the CUDA toolkit (${CUDAToolkit_LIBRARY_ROOT}); set NCCL_ROOT")
    endif()
  else()
    set(nccl_problem "NCCL needs the CUDA backend (LIFTOFF_WITH_CUDA is OFF)")
  endif()
  if(NOT LIFTOFF_WITH_NCCL)
    if(LIFTOFF_NCCL STREQUAL "ON")
      message(FATAL_ERROR "LIFTOFF_NCCL=ON but ${nccl_problem}; or use -DLIFTOFF_NCCL=OFF")
    endif()
    message(STATUS "Liftoff: building without NCCL: ${nccl_problem}")
  endif()
endif()

set(LIFTOFF_WITH_MPI OFF)
if(NOT LIFTOFF_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(LIFTOFF_WITH_MPI ON)
  elseif(LIFTOFF_MPI STREQUAL "ON")
    message(FATAL_ERROR "LIFTOFF_MPI=ON but MPI was not found; install libopenmpi-dev and openmpi-bin (Debian) or "
                        "use -DLIFTOFF_MPI=OFF")
  else()
    message(STATUS "Liftoff: building without MPI (install libopenmpi-dev openmpi-bin to enable it)")
  endif()
endif()
message(STATUS "Liftoff: distributed backends: NCCL ${LIFTOFF_WITH_NCCL} (LIFTOFF_NCCL=${LIFTOFF_NCCL}), "
               "MPI ${LIFTOFF_WITH_MPI} (LIFTOFF_MPI=${LIFTOFF_MPI})")

function(liftoff_add_distributed_sources target)
  set(dir ${PROJECT_SOURCE_DIR}/runtime/distributed)
  target_sources(${target} PRIVATE ${dir}/process_group.cpp ${dir}/env.cpp)
  # NCCL and MPI are opened at run time (nccl_loader.cpp, mpi_loader.cpp): only their headers are used here, so
  # nothing that links Liftoff needs them to build, link or start.
  target_compile_definitions(${target} PUBLIC LIFTOFF_WITH_NCCL=$<BOOL:${LIFTOFF_WITH_NCCL}>
                                              LIFTOFF_WITH_MPI=$<BOOL:${LIFTOFF_WITH_MPI}>)
  if(LIFTOFF_WITH_NCCL)
    target_sources(${target} PRIVATE ${dir}/nccl_group.cpp ${dir}/nccl_loader.cpp)
    target_include_directories(${target} PRIVATE ${NCCL_INCLUDE_DIR})
  endif()
  if(LIFTOFF_WITH_MPI)
    target_sources(${target} PRIVATE ${dir}/mpi_group.cpp ${dir}/mpi_loader.cpp)
    target_include_directories(${target} PRIVATE ${MPI_CXX_INCLUDE_DIRS})
  endif()
endfunction()
