// cuDNN is loaded at run time (dlopen) rather than linked: a machine without cuDNN, or with another major
// version, then gets a clear message from --device selection and doctor instead of a loader error before
// main. Each cuDNN function Liftoff calls is defined here with the header's signature and forwards to the
// library.
#include <cudnn.h>

#include <string>

#include "runtime/config.h"
#include "runtime/cuda/cudnn_loader.h"
#include "runtime/error.h"
#include "runtime/platform/dynamic_library.h"

namespace liftoff::cuda {

namespace {
platform::RuntimeLibrary& cudnn_library() {
  // LIFTOFF_CUDNN_LIBRARY=/path/to/libcudnn.so.9 picks one cuDNN among several installed (only that file).
  static auto* lib = new platform::RuntimeLibrary(
      {"cuDNN " + std::to_string(CUDNN_MAJOR) + " (libcudnn.so.9)",
       {"libcudnn.so.9", "libcudnn.so"},
       "install cuDNN 9 or add its lib folder to LD_LIBRARY_PATH (or name the file in LIFTOFF_CUDNN_LIBRARY)",
       config::get_string(config::Knob::cudnn_library)});
  return *lib;
}
}  // namespace

bool cudnn_loaded() {
  return cudnn_library().loaded();
}

std::string cudnn_load_error() {
  return cudnn_library().load_error();
}

void* cudnn_symbol(const char* name) {
  return cudnn_library().require(name);
}

}  // namespace liftoff::cuda

#define LIFTOFF_CUDNN_FORWARD(name, params, args)                                                           \
  cudnnStatus_t name params {                                                                               \
    static const auto fn = reinterpret_cast<cudnnStatus_t(*) params>(::liftoff::cuda::cudnn_symbol(#name)); \
    return fn args;                                                                                         \
  }

extern "C" {

size_t cudnnGetVersion(void) {
  if (!::liftoff::cuda::cudnn_loaded()) return 0;
  static const auto fn = reinterpret_cast<size_t (*)(void)>(::liftoff::cuda::cudnn_symbol("cudnnGetVersion"));
  return fn();
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  if (!::liftoff::cuda::cudnn_loaded()) return "cuDNN is not loaded";
  static const auto fn =
      reinterpret_cast<const char* (*)(cudnnStatus_t)>(::liftoff::cuda::cudnn_symbol("cudnnGetErrorString"));
  return fn(status);
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (max_size > 0) message[0] = '\0';
  if (!::liftoff::cuda::cudnn_loaded()) return;
  static const auto fn =
      reinterpret_cast<void (*)(char*, size_t)>(::liftoff::cuda::cudnn_symbol("cudnnGetLastErrorString"));
  fn(message, max_size);
}

LIFTOFF_CUDNN_FORWARD(cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t convDesc), (convDesc))
LIFTOFF_CUDNN_FORWARD(cudnnSetTensor4dDescriptor,
                      (cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                       cudnnDataType_t dataType, int n, int c, int h, int w),
                      (tensorDesc, format, dataType, n, c, h, w))
LIFTOFF_CUDNN_FORWARD(cudnnGetConvolutionMathType,
                      (cudnnConvolutionDescriptor_t desc, cudnnMathType_t* math_type), (desc, math_type))
LIFTOFF_CUDNN_FORWARD(cudnnSetConvolutionMathType,
                      (cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType), (convDesc, mathType))
LIFTOFF_CUDNN_FORWARD(cudnnSetConvolutionGroupCount, (cudnnConvolutionDescriptor_t convDesc, int groupCount),
                      (convDesc, groupCount))
LIFTOFF_CUDNN_FORWARD(cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t tensorDesc), (tensorDesc))
LIFTOFF_CUDNN_FORWARD(cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t * tensorDesc), (tensorDesc))
LIFTOFF_CUDNN_FORWARD(cudnnSetStream, (cudnnHandle_t handle, cudaStream_t streamId), (handle, streamId))
LIFTOFF_CUDNN_FORWARD(cudnnSetFilter4dDescriptor,
                      (cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                       cudnnTensorFormat_t format, int k, int c, int h, int w),
                      (filterDesc, dataType, format, k, c, h, w))
LIFTOFF_CUDNN_FORWARD(cudnnSetConvolution2dDescriptor,
                      (cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u, int v,
                       int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                       cudnnDataType_t computeType),
                      (convDesc, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType))
LIFTOFF_CUDNN_FORWARD(cudnnGetConvolutionForwardWorkspaceSize,
                      (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                       const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
                       const cudnnTensorDescriptor_t yDesc, cudnnConvolutionFwdAlgo_t algo,
                       size_t* sizeInBytes),
                      (handle, xDesc, wDesc, convDesc, yDesc, algo, sizeInBytes))
LIFTOFF_CUDNN_FORWARD(cudnnGetConvolutionBackwardFilterWorkspaceSize,
                      (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                       const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
                       const cudnnFilterDescriptor_t gradDesc, cudnnConvolutionBwdFilterAlgo_t algo,
                       size_t* sizeInBytes),
                      (handle, xDesc, dyDesc, convDesc, gradDesc, algo, sizeInBytes))
LIFTOFF_CUDNN_FORWARD(cudnnGetConvolutionBackwardDataWorkspaceSize,
                      (cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                       const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
                       const cudnnTensorDescriptor_t dxDesc, cudnnConvolutionBwdDataAlgo_t algo,
                       size_t* sizeInBytes),
                      (handle, wDesc, dyDesc, convDesc, dxDesc, algo, sizeInBytes))
LIFTOFF_CUDNN_FORWARD(cudnnGetConvolution2dForwardOutputDim,
                      (const cudnnConvolutionDescriptor_t convDesc,
                       const cudnnTensorDescriptor_t inputTensorDesc,
                       const cudnnFilterDescriptor_t filterDesc, int* n, int* c, int* h, int* w),
                      (convDesc, inputTensorDesc, filterDesc, n, c, h, w))
LIFTOFF_CUDNN_FORWARD(cudnnFindConvolutionForwardAlgorithmEx,
                      (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x,
                       const cudnnFilterDescriptor_t wDesc, const void* w,
                       const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
                       void* y, const int requestedAlgoCount, int* returnedAlgoCount,
                       cudnnConvolutionFwdAlgoPerf_t* perfResults, void* workSpace,
                       size_t workSpaceSizeInBytes),
                      (handle, xDesc, x, wDesc, w, convDesc, yDesc, y, requestedAlgoCount, returnedAlgoCount,
                       perfResults, workSpace, workSpaceSizeInBytes))
// cuDNN's ranked guesses (no timing): the legacy baseline when graph-API engines are timed against it anyway.
LIFTOFF_CUDNN_FORWARD(cudnnGetConvolutionForwardAlgorithm_v7,
                      (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
                       const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
                       const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount,
                       int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults),
                      (handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount,
                       perfResults))
LIFTOFF_CUDNN_FORWARD(cudnnGetConvolutionBackwardDataAlgorithm_v7,
                      (cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
                       const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
                       const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount,
                       int* returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t* perfResults),
                      (handle, filterDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount,
                       returnedAlgoCount, perfResults))
LIFTOFF_CUDNN_FORWARD(cudnnGetConvolutionBackwardFilterAlgorithm_v7,
                      (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
                       const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
                       const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount,
                       int* returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t* perfResults),
                      (handle, srcDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount,
                       perfResults))
LIFTOFF_CUDNN_FORWARD(cudnnFindConvolutionBackwardFilterAlgorithmEx,
                      (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x,
                       const cudnnTensorDescriptor_t dyDesc, const void* y,
                       const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc,
                       void* dw, const int requestedAlgoCount, int* returnedAlgoCount,
                       cudnnConvolutionBwdFilterAlgoPerf_t* perfResults, void* workSpace,
                       size_t workSpaceSizeInBytes),
                      (handle, xDesc, x, dyDesc, y, convDesc, dwDesc, dw, requestedAlgoCount,
                       returnedAlgoCount, perfResults, workSpace, workSpaceSizeInBytes))
LIFTOFF_CUDNN_FORWARD(cudnnFindConvolutionBackwardDataAlgorithmEx,
                      (cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void* w,
                       const cudnnTensorDescriptor_t dyDesc, const void* dy,
                       const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
                       void* dx, const int requestedAlgoCount, int* returnedAlgoCount,
                       cudnnConvolutionBwdDataAlgoPerf_t* perfResults, void* workSpace,
                       size_t workSpaceSizeInBytes),
                      (handle, wDesc, w, dyDesc, dy, convDesc, dxDesc, dx, requestedAlgoCount,
                       returnedAlgoCount, perfResults, workSpace, workSpaceSizeInBytes))
LIFTOFF_CUDNN_FORWARD(cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t filterDesc), (filterDesc))
LIFTOFF_CUDNN_FORWARD(cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t * filterDesc), (filterDesc))
LIFTOFF_CUDNN_FORWARD(cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t * convDesc), (convDesc))
LIFTOFF_CUDNN_FORWARD(cudnnCreate, (cudnnHandle_t * handle), (handle))
LIFTOFF_CUDNN_FORWARD(cudnnConvolutionForward,
                      (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                       const void* x, const cudnnFilterDescriptor_t wDesc, const void* w,
                       const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                       void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                       const cudnnTensorDescriptor_t yDesc, void* y),
                      (handle, alpha, xDesc, x, wDesc, w, convDesc, algo, workSpace, workSpaceSizeInBytes,
                       beta, yDesc, y))
LIFTOFF_CUDNN_FORWARD(cudnnConvolutionBackwardFilter,
                      (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                       const void* x, const cudnnTensorDescriptor_t dyDesc, const void* dy,
                       const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionBwdFilterAlgo_t algo,
                       void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                       const cudnnFilterDescriptor_t dwDesc, void* dw),
                      (handle, alpha, xDesc, x, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes,
                       beta, dwDesc, dw))
LIFTOFF_CUDNN_FORWARD(cudnnConvolutionBackwardData,
                      (cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t wDesc,
                       const void* w, const cudnnTensorDescriptor_t dyDesc, const void* dy,
                       const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionBwdDataAlgo_t algo,
                       void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                       const cudnnTensorDescriptor_t dxDesc, void* dx),
                      (handle, alpha, wDesc, w, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes,
                       beta, dxDesc, dx))

// The graph (backend) API (ops/conv2d/cudnn_graph.cpp, ops/attention/cudnn_sdpa_graph.cpp).
LIFTOFF_CUDNN_FORWARD(cudnnBackendCreateDescriptor,
                      (cudnnBackendDescriptorType_t descriptorType, cudnnBackendDescriptor_t* descriptor),
                      (descriptorType, descriptor))
LIFTOFF_CUDNN_FORWARD(cudnnBackendDestroyDescriptor, (cudnnBackendDescriptor_t descriptor), (descriptor))
LIFTOFF_CUDNN_FORWARD(cudnnBackendFinalize, (cudnnBackendDescriptor_t descriptor), (descriptor))
LIFTOFF_CUDNN_FORWARD(cudnnBackendSetAttribute,
                      (cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t attributeName,
                       cudnnBackendAttributeType_t attributeType, int64_t elementCount,
                       const void* arrayOfElements),
                      (descriptor, attributeName, attributeType, elementCount, arrayOfElements))
LIFTOFF_CUDNN_FORWARD(cudnnBackendGetAttribute,
                      (cudnnBackendDescriptor_t const descriptor, cudnnBackendAttributeName_t attributeName,
                       cudnnBackendAttributeType_t attributeType, int64_t requestedElementCount,
                       int64_t* elementCount, void* arrayOfElements),
                      (descriptor, attributeName, attributeType, requestedElementCount, elementCount,
                       arrayOfElements))
LIFTOFF_CUDNN_FORWARD(cudnnBackendExecute,
                      (cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                       cudnnBackendDescriptor_t variantPack),
                      (handle, executionPlan, variantPack))

}  // extern "C"
