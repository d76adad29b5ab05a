#include "ops/split/split.h"

#include <algorithm>
#include <numeric>

#include "ops/cat/cat.h"
#include "ops/views/views.h"
#include "runtime/autograd.h"

namespace liftoff {

namespace {
int64_t wrap(const Tensor& x, int64_t dim, const char* op) {
  LIFTOFF_CHECK(x.defined(), ValueError, op, ": input is an undefined tensor");
  const int64_t n = x.dim();
  const int64_t w = dim < 0 ? dim + n : dim;
  LIFTOFF_CHECK(w >= 0 && w < n, ShapeError, op, ": dim ", dim, " out of range for shape ",
                shape_str(x.shape()), " (expected in [", -n, ", ", n - 1, "])");
  return w;
}

// The pieces of x along dim d (views; `select`: each of size 1 with the dim removed), recorded as one node
// whose backward joins the pieces' gradients.
std::vector<Tensor> pieces_of(const Tensor& x, int64_t d, const std::vector<int64_t>& sizes, bool select) {
  std::vector<Tensor> pieces;
  {
    NoGradGuard views_only;  // the node below records them together
    int64_t start = 0;
    for (int64_t s : sizes) {
      pieces.push_back(select ? liftoff::select(x, d, start) : slice(x, d, start, start + s));
      start += s;
    }
  }
  if (should_record({x})) {
    std::vector<Shape> shapes;
    for (const Tensor& p : pieces) shapes.push_back(p.shape());
    record(pieces, select ? "unbind" : "split", {x},
           [shapes, d, select](const std::vector<Tensor>& grads, const NeedsGrad&) {
             Tensor any;
             for (const Tensor& g : grads) any = g.defined() ? g : any;
             std::vector<Tensor> parts;
             for (size_t i = 0; i < grads.size(); ++i)
               parts.push_back(grads[i].defined() ? grads[i]
                                                  : Tensor::zeros(shapes[i], any.dtype(), any.device()));
             return std::vector<Tensor>{select ? stack(parts, d) : cat(parts, d)};
           });
  }
  return pieces;
}
}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  const int64_t d = wrap(x, dim, "split");
  const int64_t n = x.shape()[d];
  LIFTOFF_CHECK(split_size > 0 || (split_size == 0 && n == 0), ShapeError, "split: split_size ", split_size,
                " must be positive (shape ", shape_str(x.shape()), ", dim ", dim, ")");
  if (n == 0) return {x};
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += split_size)
    sizes.push_back(std::min(n, start + split_size) - start);
  return pieces_of(x, d, sizes, /*select=*/false);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = wrap(x, dim, "split");
  bool ok = true;
  for (int64_t s : sizes) ok = ok && s >= 0;
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  LIFTOFF_CHECK(ok && total == x.shape()[d], ShapeError, "split: sizes ", shape_str(sizes),
                " must be non-negative and add up to ", x.shape()[d], ", the size of dim ", dim, " of shape ",
                shape_str(x.shape()));
  return pieces_of(x, d, sizes, /*select=*/false);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const int64_t d = wrap(x, dim, "chunk");
  LIFTOFF_CHECK(chunks > 0, ShapeError, "chunk: chunks must be positive, got ", chunks, " (shape ",
                shape_str(x.shape()), ")");
  const int64_t n = x.shape()[d];
  // PyTorch: pieces of ceil(n / chunks); a dim of size 0 gives `chunks` empty pieces.
  if (n == 0) {
    std::vector<Tensor> pieces;
    for (int64_t i = 0; i < chunks; ++i) pieces.push_back(slice(x, d, 0, 0));
    return pieces;
  }
  return split(x, (n + chunks - 1) / chunks, d);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  const int64_t d = wrap(x, dim, "unbind");
  if (x.shape()[d] == 0) return {};
  return pieces_of(x, d, std::vector<int64_t>(static_cast<size_t>(x.shape()[d]), 1), /*select=*/true);
}

}  // namespace liftoff
