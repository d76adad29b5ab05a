# The installed library: libliftoff.so, linked from the objects of the in-tree static library (tools and tests
# keep linking libliftoff.a: self-contained binaries, internal symbols visible to the tests).
#
# What a program that links it needs, and nothing more: its NEEDED entries are the C/C++ runtime, zlib and
# OpenMP's runtime. The CUDA runtime is linked in statically and hidden; cuDNN, cuBLAS, nvJPEG, NVML, NCCL and MPI
# are opened at run time (runtime/cuda/*_loader.cpp, runtime/distributed/*_loader.cpp), so a CPU-only program
# configures, links and runs on a machine without any of them, and asking it for CUDA there says what is missing.
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/liftoff_shared.cpp
     CONTENT "// libliftoff.so: every object comes from libliftoff.a (cmake/LiftoffSharedLibrary.cmake).\n")
# The loaders' forwarding definitions (cudnnCreate, cublasCreate_v2, ncclAllReduce, MPI_Init_thread, ...) stay
# inside: a program that uses one of those libraries itself gets the library's own functions.
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/liftoff_shared.map
     CONTENT "{\n  global: *;\n  local: cudnn*; cublas*; nccl*; MPI_*;\n};\n")

add_library(liftoff_shared SHARED ${PROJECT_BINARY_DIR}/liftoff_shared.cpp)
set_target_properties(liftoff_shared PROPERTIES OUTPUT_NAME liftoff EXPORT_NAME liftoff
                                                VERSION ${PROJECT_VERSION}
                                                SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
                                                LINK_DEPENDS ${PROJECT_BINARY_DIR}/liftoff_shared.map)
target_link_libraries(liftoff_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,liftoff>")
# --no-undefined: a symbol left for the program to provide (e.g. an MPI handle) fails here, not at its start.
# --exclude-libs: the static CUDA runtime's and libjpeg-turbo's symbols stay private, so a program with its own
# CUDA runtime (its own kernels) never binds Liftoff's calls to it, nor the other way round.
target_link_options(liftoff_shared PRIVATE LINKER:--no-undefined LINKER:--exclude-libs,libcudart_static.a
                    LINKER:--exclude-libs,libturbojpeg.a
                    LINKER:--version-script=${PROJECT_BINARY_DIR}/liftoff_shared.map)

# What a program compiling against the installed headers needs: the headers (C++17) and nothing else; they
# include no CUDA, cuDNN, NCCL, MPI, Eigen or JSON header (tests/package checks the installed closure).
# LIFTOFF_WITH_CUDA stays undefined (0) for such a program: LIFTOFF_DISPATCH in its own ops then has no CUDA
# branch. The package's `cuda` component (Liftoff::cuda) defines it to 1, for programs with CUDA kernels.
target_include_directories(liftoff_shared INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/liftoff>)
target_compile_features(liftoff_shared INTERFACE cxx_std_17)
if(LIFTOFF_SANITIZE)
  target_link_options(liftoff_shared INTERFACE -fsanitize=${LIFTOFF_SANITIZE})
endif()
