// cuBLAS is opened at run time like cuDNN; see cublas_loader.cpp.
#pragma once
#include <string>

namespace liftoff::cuda {

bool cublas_loaded();
// Empty when cuBLAS is loaded; otherwise what is missing and how to install it.
std::string cublas_load_error();

}  // namespace liftoff::cuda
