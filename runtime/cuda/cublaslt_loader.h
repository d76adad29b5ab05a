// cuBLASLt is opened at run time like cuBLAS (cublas_loader.cpp); see cublaslt_loader.cpp.
#pragma once
#include <string>

namespace liftoff::cuda {

// False where libcublasLt cannot be opened: the large-GEMM search (ops/matmul) then keeps cuBLAS's own pick.
bool cublaslt_loaded();
std::string cublaslt_load_error();

}  // namespace liftoff::cuda
