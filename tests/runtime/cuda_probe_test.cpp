// Every "why CUDA cannot be used" reason, from probes describing the failure (no GPU needed to test them).
#include "runtime/cuda_probe.h"

#include <gtest/gtest.h>

namespace liftoff {
namespace {

CudaProbe healthy() {
  CudaProbe p;
  p.driver_version = 13000;
  p.runtime_version = 13000;
  p.device_count = 2;
  p.name = "NVIDIA H200";
  p.major = 9;
  p.minor = 0;
  p.cudnn_version = 91900;
  p.cudnn_compiled_major = 9;
  return p;
}

TEST(CudaProbe, HealthyDeviceHasNoReason) {
  EXPECT_EQ(explain_cuda_probe(healthy()), "");
}

TEST(CudaProbe, NoDriver) {
  CudaProbe p = healthy();
  p.driver_version = 0;
  EXPECT_EQ(explain_cuda_probe(p),
            "no NVIDIA driver found (libcuda.so.1 could not be loaded); install the NVIDIA driver, or use "
            "--device cpu");
}

TEST(CudaProbe, DriverOlderThanTheRuntime) {
  CudaProbe p = healthy();
  p.driver_version = 12040;
  EXPECT_EQ(explain_cuda_probe(p),
            "the NVIDIA driver supports CUDA up to 12.4 but this build uses CUDA 13.0; update the driver or "
            "rebuild with an older CUDA toolkit");
}

TEST(CudaProbe, NoVisibleDevice) {
  CudaProbe p = healthy();
  p.device_count = 0;
  p.count_error = "no CUDA-capable device is detected";
  EXPECT_EQ(explain_cuda_probe(p),
            "no CUDA device is visible (no CUDA-capable device is detected); check nvidia-smi and "
            "CUDA_VISIBLE_DEVICES, or use --device cpu");
}

TEST(CudaProbe, IndexOutOfRange) {
  CudaProbe p = healthy();
  p.index = 2;
  EXPECT_EQ(explain_cuda_probe(p),
            "cuda:2 does not exist: this machine has 2 CUDA device(s), cuda:0..cuda:1");
}

TEST(CudaProbe, NoKernelImageNamesTheArchitectureToBuild) {
  CudaProbe p = healthy();
  p.name = "NVIDIA GeForce RTX 5090";
  p.major = 12;
  p.minor = 0;
  p.no_kernel_image = true;
  EXPECT_EQ(explain_cuda_probe(p),
            "this build has no kernels for NVIDIA GeForce RTX 5090 (sm_120); rebuild with "
            "-DCMAKE_CUDA_ARCHITECTURES=120");
}

TEST(CudaProbe, AllocationAndKernelFailures) {
  CudaProbe p = healthy();
  p.alloc_error = "out of memory";
  EXPECT_EQ(explain_cuda_probe(p), "cuda:0 cannot allocate memory: out of memory");
  p = healthy();
  p.kernel_error = "unspecified launch failure";
  EXPECT_EQ(explain_cuda_probe(p), "a test kernel failed on cuda:0: unspecified launch failure");
}

TEST(CudaProbe, CudnnMissingOrOfAnotherMajorVersion) {
  CudaProbe p = healthy();
  p.cudnn_loaded = false;
  p.cudnn_load_error = "cuDNN 9 (libcudnn.so.9) could not be loaded (...)";
  EXPECT_EQ(explain_cuda_probe(p), p.cudnn_load_error);
  p = healthy();
  p.cudnn_version = 8907;
  EXPECT_EQ(
      explain_cuda_probe(p),
      "cuDNN 8907 is loaded but this build needs cuDNN 9.x; install cuDNN 9 or point LD_LIBRARY_PATH at it");
}

TEST(CudaProbe, CublasMissingIsNamedBeforeCudnn) {
  CudaProbe p = healthy();
  p.cublas_loaded = false;
  p.cublas_load_error = "cuBLAS 13 (libcublas.so.13) could not be loaded (...)";
  p.cudnn_loaded = false;
  p.cudnn_load_error = "cuDNN 9 (libcudnn.so.9) could not be loaded (...)";
  EXPECT_EQ(explain_cuda_probe(p), p.cublas_load_error);
}

}  // namespace
}  // namespace liftoff
