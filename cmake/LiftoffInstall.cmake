# `cmake --install` rules: the shared library (libliftoff.so, cmake/LiftoffSharedLibrary.cmake), the public
# headers (include/liftoff/, laid out as in the source tree, so "runtime/tensor.h" works the same in and out of
# the tree), and the CMake package (find_package(Liftoff) -> Liftoff::liftoff, which needs nothing else found;
# the optional `cuda` component, Liftoff::cuda, finds the CUDA toolkit and cuDNN's headers).
include(CMakePackageConfigHelpers)

set(LIFTOFF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Liftoff)

install(TARGETS liftoff_shared EXPORT LiftoffTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT LiftoffTargets NAMESPACE Liftoff:: DESTINATION ${LIFTOFF_INSTALL_CMAKEDIR})

# The headers reachable from `roots` through #include "..." lines naming files of this tree, roots included.
function(liftoff_header_closure out_var)
  set(pending ${ARGN})
  set(seen "")
  while(pending)
    list(POP_FRONT pending header)
    if(header IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${header})
    file(STRINGS ${PROJECT_SOURCE_DIR}/${header} include_lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
    foreach(line IN LISTS include_lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*" "\\1" included "${line}")
      if(EXISTS ${PROJECT_SOURCE_DIR}/${included})
        list(APPEND pending ${included})
      endif()
    endforeach()
  endwhile()
  set(${out_var} ${seen} PARENT_SCOPE)
endfunction()

# Public headers: what the umbrella liftoff.h includes, directly or not, plus what a CUDA kernel of a user's
# own op needs (streams, device guard, check macros, allocator statistics). Everything else (kernels.h, *.cuh,
# helpers only .cpp/.cu files include) stays out. Editing a public header re-runs CMake, so a header it starts
# to include is installed too.
set(liftoff_header_roots liftoff.h)
if(LIFTOFF_WITH_CUDA)
  list(APPEND liftoff_header_roots
       runtime/cuda/context.h runtime/cuda/check.h runtime/cuda/caching_allocator.h)
endif()
liftoff_header_closure(liftoff_public_headers ${liftoff_header_roots})
foreach(header IN LISTS liftoff_public_headers)
  get_filename_component(header_dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/liftoff/${header_dir})
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${PROJECT_SOURCE_DIR}/${header})
endforeach()

# Where the build found cuDNN's headers: searched last by the `cuda` component, after the consumer's hints.
set(LIFTOFF_CONFIG_CUDNN_INCLUDE_DIR "")
if(LIFTOFF_WITH_CUDA)
  set(LIFTOFF_CONFIG_CUDNN_INCLUDE_DIR ${CUDNN_INCLUDE_DIR})
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/LiftoffConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/LiftoffConfig.cmake
                              INSTALL_DESTINATION ${LIFTOFF_INSTALL_CMAKEDIR})
# 0.x: minor versions may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/LiftoffConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/LiftoffConfig.cmake ${PROJECT_BINARY_DIR}/LiftoffConfigVersion.cmake
        DESTINATION ${LIFTOFF_INSTALL_CMAKEDIR})
