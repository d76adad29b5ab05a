#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// torch.split / chunk / unbind: views of x (sharing its storage, any dtype and device), recorded as one
// autograd node for all pieces: x's gradient is the pieces' gradients joined in one cat (stack for unbind),
// zeros for a piece that got none, rather than a zero-filled copy of x per piece summed. Negative dims count
// from the end. split(x, split_size, dim): pieces of split_size (> 0, or 0 for a dim of size 0) along dim;
// the last may be smaller.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// split(x, sizes, dim) (torch.split with a list): pieces of the given sizes, which must add up to the size of
// dim.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// torch.chunk(x, chunks, dim): ceil(size / chunks)-sized pieces (so possibly fewer than chunks), as PyTorch.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// torch.unbind(x, dim): every index of dim, that dim removed.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);

}  // namespace liftoff
