// cuDNN is opened at run time; see cudnn_loader.cpp.
#pragma once
#include <string>

namespace liftoff::cuda {

bool cudnn_loaded();
// Empty when cuDNN is loaded; otherwise what is missing and how to install it.
std::string cudnn_load_error();
// The address of a cuDNN function; throws BackendError when cuDNN or the function is missing.
void* cudnn_symbol(const char* name);

}  // namespace liftoff::cuda
