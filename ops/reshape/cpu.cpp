// reshape has no CPU kernel: a view, or Tensor::contiguous() for strided input, does all the work. This file
// exists because ops/CMakeLists.txt compiles <op>/cpu.cpp for every op.
