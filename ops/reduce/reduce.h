#pragma once
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// Reductions, with PyTorch's names and semantics. Dtypes: f32/f64 on the CPU (accumulated in f64), also
// f16/bf16 on CUDA (accumulated in f32); results keep x's dtype unless said otherwise.
// `dims`: the dimensions to reduce (negative counts from the end, duplicates are an error); an empty list
// reduces every dimension (as PyTorch's dim=None / dim=[]). keepdim keeps each reduced dimension with size 1.
// A 0-d tensor accepts dims {0} and {-1}. Deterministic: the combination order depends only on the shapes
// (no atomics), on the CPU and on CUDA.
// Autocast: sum, mean, var, std, norm and logsumexp of an f16/bf16 CUDA tensor compute in f32 and return f32
// under autocast (PyTorch's fp32 list); max/min/amax/amin/argmax/argmin keep the dtype (exact).

// Sum and mean over all elements -> a 0-d tensor. The mean of an empty tensor is NaN, its sum 0.
// Backward: gx = gy (sum) or gy / numel (mean) in every element.
Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);

// torch.sum(x, dims, keepdim) / torch.mean(...). An empty reduced extent sums to 0 and averages to NaN.
// Backward: gy broadcast back over the reduced dimensions (divided by their element count for mean).
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// torch.max(x, dim, keepdim) / torch.min: (values, indices) along one dimension; indices are i64 and point at
// the first maximum (minimum); NaN counts as the maximum (minimum) and propagates. Backward: the gradient
// goes to the selected index only. The dimension must not be empty (ShapeError).
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
// torch.max(x) / torch.min(x): over all elements -> 0-d. Backward as amax/amin (ties share the gradient).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);

// torch.amax / torch.amin over dims (NaN propagates). Backward: gy split evenly among the elements equal to
// the result (as PyTorch).
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// torch.argmax / torch.argmin along one dimension -> i64 indices of the first extreme (not differentiable).
// The overloads without dim index the flattened tensor (a 0-d result).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x);
Tensor argmin(const Tensor& x);

// torch.var / torch.std over dims with Bessel's correction (divides by N - correction; correction=1 is
// PyTorch's default, 0 the population variance). N - correction <= 0 gives inf or NaN, as PyTorch.
// Computed in one pass (Welford/Chan merges). Backward: gx = gy * 2 (x - mean) / (N - correction) for var,
// that over 2 std for std.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);

// torch.linalg.vector_norm(x, p, dims, keepdim) (also torch.norm(x, p, dims)): (sum |x|^p)^(1/p) for p > 0,
// max |x| for p = inf (std::numeric_limits<double>::infinity()). ValueError for p <= 0 or NaN. Backward:
// gy * sign(x) |x|^(p-1) / norm^(p-1) (0 where the norm is 0), for inf the amax rule on |x|.
Tensor norm(const Tensor& x, double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// torch.logsumexp(x, dims, keepdim): log(sum(exp(x))) computed stably (one pass with a running maximum); all
// -inf gives -inf, any +inf gives +inf. Backward: gx = gy * exp(x - result).
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

}  // namespace liftoff
