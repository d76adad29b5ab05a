# Finds cuDNN 9 (header and library) and defines the imported target Liftoff::cudnn.
find_path(CUDNN_INCLUDE_DIR cudnn_version.h
  HINTS ${CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include
  PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn
  HINTS ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu
  PATH_SUFFIXES lib lib64)
if(CUDNN_INCLUDE_DIR)
  file(STRINGS ${CUDNN_INCLUDE_DIR}/cudnn_version.h _cudnn_major REGEX "^#define CUDNN_MAJOR")
  string(REGEX MATCH "[0-9]+" CUDNN_VERSION_MAJOR "${_cudnn_major}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION_MAJOR)
if(CUDNN_FOUND AND NOT TARGET Liftoff::cudnn)
  add_library(Liftoff::cudnn UNKNOWN IMPORTED)
  set_target_properties(Liftoff::cudnn PROPERTIES IMPORTED_LOCATION ${CUDNN_LIBRARY}
                                                 INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
endif()
