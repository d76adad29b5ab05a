// reshape has no CUDA kernel: a view, or Tensor::contiguous() for strided input, does all the work. This file
// exists because ops/CMakeLists.txt compiles <op>/cuda.cu for every op.
