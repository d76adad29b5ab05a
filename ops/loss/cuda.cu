#include <cmath>

#include "ops/common/index_dtype.h"
#include "ops/loss/kernels.h"
#include "ops/loss/loss_math.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int kReduceThreads = 256;
constexpr int kMaxPartials = 1024;  // also the finishing block's size

// A loss sum and a weight sum (nll_loss's divisor), reduced together.
template <class A>
struct Sums {
  A loss, weight;
};

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Block-wide sums in a fixed order (valid in thread 0); blockDim.x is a multiple of 32.
template <class A>
__device__ Sums<A> block_sum(Sums<A> v) {
  __shared__ A loss[32], weight[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v.loss = warp_sum(v.loss);
  v.weight = warp_sum(v.weight);
  if (lane == 0) {
    loss[warp] = v.loss;
    weight[warp] = v.weight;
  }
  __syncthreads();
  if (warp == 0) {
    const bool live = lane < static_cast<int>(blockDim.x / 32);
    v.loss = warp_sum(live ? loss[lane] : A(0));
    v.weight = warp_sum(live ? weight[lane] : A(0));
  }
  return v;
}

// Pass 1: block b sums f(i) over its grid-stride share; the split depends only on n and the grid.
template <class A, class F>
__global__ void partial_sums_kernel(int64_t n, F f, Sums<A>* partials) {
  Sums<A> acc{A(0), A(0)};
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const Sums<A> s = f(i);
    acc.loss += s.loss;
    acc.weight += s.weight;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Pass 2, one block: out = loss sum / divisor, or / weight sum when by_weight.
template <class T, class A>
__global__ void finish_kernel(const Sums<A>* partials, int count, A divisor, bool by_weight, T* out,
                              A* total_weight) {
  Sums<A> acc{A(0), A(0)};
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    acc.loss += partials[i].loss;
    acc.weight += partials[i].weight;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) {
    out[0] = convert<T>(acc.loss / (by_weight ? acc.weight : divisor));
    if (total_weight) *total_weight = acc.weight;
  }
}

template <class T, class F>
__global__ void elementwise_loss_kernel(int64_t n, F f, T* out) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) out[i] = convert<T>(f(i).loss);
}

// Deterministic sum of f over [0, n) into the one-element `out` (two passes, no atomics).
template <class T, class A, class F>
void reduce_to_scalar(const Tensor& out, int64_t n, const F& f, A divisor, bool by_weight, A* total_weight) {
  const int device = out.device().index;
  cudaStream_t stream = compute_stream(device);
  const int64_t wanted = (n + kReduceThreads * 4 - 1) / (kReduceThreads * 4);
  const int blocks = static_cast<int>(wanted < 1 ? 1 : (wanted > kMaxPartials ? kMaxPartials : wanted));
  const Tensor partials = Tensor::empty({2 * blocks}, DTypeOf<A>::value, out.device());
  auto* p = static_cast<Sums<A>*>(partials.raw_data());
  partial_sums_kernel<A><<<blocks, kReduceThreads, 0, stream>>>(n, f, p);
  LIFTOFF_LAUNCH_CHECK();
  finish_kernel<T, A><<<1, kMaxPartials, 0, stream>>>(p, blocks, divisor, by_weight,
                                                      static_cast<T*>(out.raw_data()), total_weight);
  LIFTOFF_LAUNCH_CHECK();
}

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

template <class T, class A>
struct PointwiseElem {
  const T *x, *t, *w, *pw;
  PointwiseLoss kind;
  A p;
  __device__ A at(const T* v, int64_t i) const { return v ? convert<A>(v[i]) : A(1); }
  __device__ Sums<A> operator()(int64_t i) const {
    return {loss_math::value<A>(kind, p, convert<A>(x[i]), convert<A>(t[i]), at(w, i), at(pw, i)), A(0)};
  }
};

template <class T, class A>
PointwiseElem<T, A> pointwise_elem(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t,
                                   const Tensor& w, const Tensor& pw) {
  return {ptr_or_null<T>(x),      ptr_or_null<T>(t), ptr_or_null<T>(w), ptr_or_null<T>(pw), a.kind,
          static_cast<A>(a.param)};
}

template <class T, class A>
__global__ void pointwise_backward_kernel(PointwiseElem<T, A> e, const T* gy, bool reduce, A divisor,
                                          int64_t n, T* gx, T* gt) {
  const A g0 = reduce ? convert<A>(gy[0]) / divisor : A(0);
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const A g = reduce ? g0 : convert<A>(gy[i]);
    const auto d =
        loss_math::grad<A>(e.kind, e.p, convert<A>(e.x[i]), convert<A>(e.t[i]), e.at(e.w, i), e.at(e.pw, i));
    if (gx) gx[i] = convert<T>(g * d.dx);
    if (gt) gt[i] = convert<T>(g * d.dt);
  }
}

// Row r of the target is (sample r / inner, position r % inner); its input element for class c follows.
template <class T, class I, class A>
struct NllElem {
  const T* x;
  const I* t;
  const T* w;
  int64_t classes, inner, ignore_index;
  __device__ Sums<A> operator()(int64_t r) const {
    const int64_t c = static_cast<int64_t>(t[r]);
    if (c == ignore_index) return {A(0), A(0)};
    if (c < 0 || c >= classes) return {A(NAN), A(0)};  // cannot throw without a host sync
    const A wc = w ? convert<A>(w[c]) : A(1);
    const int64_t s = r % inner;
    return {-wc * convert<A>(x[(r - s) * classes + c * inner + s]), wc};
  }
};

// Gather form over every input element: no zero fill, no scatter.
template <class T, class I, class A>
__global__ void nll_backward_kernel(NllLossArgs a, const I* t, const T* w, const A* total_weight, const T* gy,
                                    int64_t total, T* gx) {
  const A g0 = a.reduce ? convert<A>(gy[0]) / (a.mean ? *total_weight : A(1)) : A(0);
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const int64_t s = i % a.inner;
    const int64_t c = (i / a.inner) % a.classes;
    const int64_t r = (i / (a.inner * a.classes)) * a.inner + s;
    const bool hit = static_cast<int64_t>(t[r]) == c && c != a.ignore_index;
    const A g = a.reduce ? g0 : convert<A>(gy[r]);
    gx[i] = convert<T>(hit ? -(w ? convert<A>(w[c]) : A(1)) * g : A(0));
  }
}
}  // namespace

void pointwise_loss_forward(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t, const Tensor& w,
                            const Tensor& pw, const Tensor& out) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t n = x.numel();
  dispatch_device_float(x.dtype(), "loss", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const PointwiseElem<T, A> f = pointwise_elem<T, A>(a, x, t, w, pw);
    if (a.reduce) {
      reduce_to_scalar<T, A>(out, n, f, static_cast<A>(a.divisor), false, nullptr);
      return;
    }
    elementwise_loss_kernel<T>
        <<<grid_for(n), kBlock, 0, compute_stream(device)>>>(n, f, static_cast<T*>(out.raw_data()));
    LIFTOFF_LAUNCH_CHECK();
  });
}

void pointwise_loss_backward(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t, const Tensor& w,
                             const Tensor& pw, const Tensor& gy, const Tensor& gx, const Tensor& gt) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t n = x.numel();
  dispatch_device_float(x.dtype(), "loss backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    pointwise_backward_kernel<T, A><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        pointwise_elem<T, A>(a, x, t, w, pw), ptr_or_null<T>(gy), a.reduce, static_cast<A>(a.divisor), n,
        gx.defined() ? static_cast<T*>(gx.raw_data()) : nullptr,
        gt.defined() ? static_cast<T*>(gt.raw_data()) : nullptr);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void nll_loss_forward(const NllLossArgs& a, const Tensor& x, const Tensor& target, const Tensor& w,
                      const Tensor& out, const Tensor& total_weight) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t rows = a.n * a.inner;
  dispatch_device_float(x.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    dispatch_index(target.dtype(), "nll_loss", [&](auto itag) {
      using I = decltype(itag);
      const NllElem<T, I, A> f{ptr_or_null<T>(x), target.data<I>(), ptr_or_null<T>(w),
                               a.classes,         a.inner,          a.ignore_index};
      if (a.reduce) {
        reduce_to_scalar<T, A>(out, rows, f, A(1), a.mean, static_cast<A*>(total_weight.raw_data()));
        return;
      }
      elementwise_loss_kernel<T>
          <<<grid_for(rows), kBlock, 0, compute_stream(device)>>>(rows, f, static_cast<T*>(out.raw_data()));
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

void nll_loss_backward(const NllLossArgs& a, const Tensor& target, const Tensor& w,
                       const Tensor& total_weight, const Tensor& gy, const Tensor& gx) {
  const int device = gx.device().index;
  DeviceGuard guard(device);
  const int64_t total = gx.numel();
  dispatch_device_float(gx.dtype(), "nll_loss backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    dispatch_index(target.dtype(), "nll_loss backward", [&](auto itag) {
      using I = decltype(itag);
      nll_backward_kernel<T, I, A><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
          a, target.data<I>(), ptr_or_null<T>(w), static_cast<const A*>(total_weight.raw_data()),
          ptr_or_null<T>(gy), total, static_cast<T*>(gx.raw_data()));
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

}  // namespace liftoff::cuda
