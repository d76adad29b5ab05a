// Times CPU conv2d strategies on the ResNet-20 layer shapes (28x28 input) at batch 128 and 16, forward and
// forward+backward (input, weight and bias gradients), median of several runs on random inputs:
//   per-image: liftoff::conv2d as shipped (im2col + Eigen GEMM per image, images split across threads)
//   batched:   im2col of the whole batch + one big GEMM per direction, threaded by Eigen itself
//   spatial:   TensorFlow's SpatialConvolution recipe on Eigen Tensor (Eigen 3.4 has no SpatialConvolution):
//              extract_image_patches + contraction on a ThreadPoolDevice, NHWC data; the layout conversion
//              is not timed, which favours it
// Each strategy's outputs and gradients are checked against liftoff::conv2d before timing.
// Usage: bench_conv_strategies [threads=2] [repeats=5]
#define EIGEN_USE_THREADS
#if defined(__GNUC__) && !defined(__clang__)
// GCC 13 reports a false -Warray-bounds inside Eigen's tensor contraction (std::array<Index, 1> indexing).
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <unsupported/Eigen/CXX11/Tensor>
#include <vector>

#include "ops/conv2d/conv2d.h"
#include "runtime/autograd.h"
#include "runtime/parallel.h"
#include "runtime/random.h"

namespace {

using liftoff::Tensor;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;

struct Layer {
  const char* name;
  int64_t c, h, k, r, stride, pad;
};
// ResNet-20 on 28x28: stem, then stages at 28, 14, 7 with stride-2 3x3 convs and 1x1 projections.
const Layer kLayers[] = {
    {"stem 1->16 3x3 @28", 1, 28, 16, 3, 1, 1},    {"s1 16->16 3x3 @28", 16, 28, 16, 3, 1, 1},
    {"s2 16->32 3x3/2 @28", 16, 28, 32, 3, 2, 1},  {"s2 proj 16->32 1x1/2", 16, 28, 32, 1, 2, 0},
    {"s2 32->32 3x3 @14", 32, 14, 32, 3, 1, 1},    {"s3 32->64 3x3/2 @14", 32, 14, 64, 3, 2, 1},
    {"s3 proj 32->64 1x1/2", 32, 14, 64, 1, 2, 0}, {"s3 64->64 3x3 @7", 64, 7, 64, 3, 1, 1},
};

struct Geometry {
  int64_t n, c, h, w, k, r, s, oh, ow, stride, pad;
  int64_t crs() const { return c * r * s; }
  int64_t plane() const { return oh * ow; }
};

double median_ms(int repeats, const std::function<void()>& fn) {
  fn();  // warm-up: first-touch allocations, thread start
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

// ---- batched im2col + one GEMM per direction (Eigen threads the GEMMs) ----
// cols is [C*R*S, N*OH*OW] row-major; image i owns columns [i*P, (i+1)*P).
void im2col_into(const float* x, float* cols, int64_t ld, const Geometry& g) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        float* row = cols + ((c * g.r + r) * g.s + s) * ld;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t ih = oh * g.stride - g.pad + r;
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const int64_t iw = ow * g.stride - g.pad + s;
            row[oh * g.ow + ow] =
                (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) ? x[(c * g.h + ih) * g.w + iw] : 0.f;
          }
        }
      }
}

void col2im_from(const float* cols, int64_t ld, float* gx, const Geometry& g) {
  std::fill(gx, gx + g.c * g.h * g.w, 0.f);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        const float* row = cols + ((c * g.r + r) * g.s + s) * ld;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t ih = oh * g.stride - g.pad + r;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const int64_t iw = ow * g.stride - g.pad + s;
            if (iw >= 0 && iw < g.w) gx[(c * g.h + ih) * g.w + iw] += row[oh * g.ow + ow];
          }
        }
      }
}

struct Batched {
  Geometry g;
  std::vector<float> cols, big_out, grad_cols;
  explicit Batched(const Geometry& geo)
      : g(geo),
        cols(static_cast<size_t>(g.crs() * g.n * g.plane())),
        big_out(static_cast<size_t>(g.k * g.n * g.plane())),
        grad_cols(cols.size()) {}

  void forward(const float* x, const float* w, const float* b, float* y) {
    const int64_t cols_n = g.n * g.plane();
    liftoff::parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        im2col_into(x + i * g.c * g.h * g.w, cols.data() + i * g.plane(), cols_n, g);
    });
    MatMap(big_out.data(), g.k, cols_n).noalias() =
        ConstMatMap(w, g.k, g.crs()) * ConstMatMap(cols.data(), g.crs(), cols_n);
    liftoff::parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t k = 0; k < g.k; ++k)
          for (int64_t p = 0; p < g.plane(); ++p)
            y[(i * g.k + k) * g.plane() + p] = big_out[k * cols_n + i * g.plane() + p] + b[k];
    });
  }
  // Uses cols from forward (as a training step would keep them).
  void backward(const float* w, const float* gy, float* gx, float* gw, float* gb) {
    const int64_t cols_n = g.n * g.plane();
    liftoff::parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t k = 0; k < g.k; ++k)
          std::copy(gy + (i * g.k + k) * g.plane(), gy + (i * g.k + k + 1) * g.plane(),
                    big_out.data() + k * cols_n + i * g.plane());
    });
    const ConstMatMap grad_out(big_out.data(), g.k, cols_n);
    MatMap(gw, g.k, g.crs()).noalias() = grad_out * ConstMatMap(cols.data(), g.crs(), cols_n).transpose();
    Eigen::Map<Eigen::VectorXf>(gb, g.k) = grad_out.rowwise().sum();
    MatMap(grad_cols.data(), g.crs(), cols_n).noalias() = ConstMatMap(w, g.k, g.crs()).transpose() * grad_out;
    liftoff::parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        col2im_from(grad_cols.data() + i * g.plane(), cols_n, gx + i * g.c * g.h * g.w, g);
    });
  }
};

// ---- TensorFlow's SpatialConvolution recipe on Eigen Tensor (NHWC input, [R, S, C, K] kernel) ----
using T4 = Eigen::TensorMap<Eigen::Tensor<float, 4, Eigen::RowMajor>>;
using CT4 = Eigen::TensorMap<Eigen::Tensor<const float, 4, Eigen::RowMajor>>;
using T2 = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>>;
using Pair = Eigen::IndexPair<Eigen::Index>;

struct Spatial {
  Geometry g;
  Eigen::ThreadPoolDevice& device;
  std::vector<float> reversed_kernel;  // [R, S, K, C], flipped in R and S
  Spatial(const Geometry& geo, Eigen::ThreadPoolDevice& dev)
      : g(geo), device(dev), reversed_kernel(static_cast<size_t>(g.r * g.s * g.k * g.c)) {}

  void forward(const float* x_nhwc, const float* w_rsck, const float* b, float* y_nhwc) {
    const CT4 x(x_nhwc, g.n, g.h, g.w, g.c);
    const CT4 w(w_rsck, g.r, g.s, g.c, g.k);
    T2 y(y_nhwc, g.n * g.plane(), g.k);
    const Eigen::array<Eigen::Index, 2> patch_dims{g.n * g.plane(), g.crs()};
    const Eigen::array<Eigen::Index, 2> kernel_dims{g.crs(), g.k};
    const Eigen::array<Pair, 1> contract{Pair(1, 0)};
    const Eigen::array<Eigen::Index, 2> bias_bcast{g.n * g.plane(), 1};
    const Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>> bias(b, 1, g.k);
    y.device(device) =
        x.extract_image_patches(g.r, g.s, g.stride, g.stride, 1, 1, 1, 1, g.pad, g.pad, g.pad, g.pad, 0.f)
            .reshape(patch_dims)
            .contract(w.reshape(kernel_dims), contract) +
        bias.broadcast(bias_bcast);
  }

  void backward(const float* x_nhwc, const float* w_rsck, const float* gy_nhwc, float* gx_nhwc,
                float* gw_rsck, float* gb) {
    const CT4 x(x_nhwc, g.n, g.h, g.w, g.c);
    const CT4 gy(gy_nhwc, g.n, g.oh, g.ow, g.k);
    const Eigen::array<Pair, 1> contract_inner{Pair(1, 0)};
    // Weight: patches(x)^T * gy.
    const Eigen::array<Eigen::Index, 2> patch_dims{g.n * g.plane(), g.crs()};
    const Eigen::array<Eigen::Index, 2> gy_dims{g.n * g.plane(), g.k};
    const Eigen::array<Pair, 1> contract_rows{Pair(0, 0)};
    T2(gw_rsck, g.crs(), g.k).device(device) =
        x.extract_image_patches(g.r, g.s, g.stride, g.stride, 1, 1, 1, 1, g.pad, g.pad, g.pad, g.pad, 0.f)
            .reshape(patch_dims)
            .contract(gy.reshape(gy_dims), contract_rows);
    const Eigen::array<Eigen::Index, 1> over_rows{0};
    Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor>>(gb, g.k).device(device) =
        gy.reshape(gy_dims).sum(over_rows);
    // Input: stride-inflated gy correlated with the flipped kernel ("full" padding).
    const CT4 w(w_rsck, g.r, g.s, g.c, g.k);
    const Eigen::array<bool, 4> flip{true, true, false, false};
    const Eigen::array<int, 4> swap_ck{0, 1, 3, 2};
    T4(reversed_kernel.data(), g.r, g.s, g.k, g.c).device(device) = w.reverse(flip).shuffle(swap_ck);
    const int64_t top = g.r - 1 - g.pad, left = g.s - 1 - g.pad;
    const int64_t bottom = g.h + g.r - 1 - ((g.oh - 1) * g.stride + 1) - top;
    const int64_t right = g.w + g.s - 1 - ((g.ow - 1) * g.stride + 1) - left;
    const Eigen::array<Eigen::Index, 2> gpatch_dims{g.n * g.h * g.w, g.r * g.s * g.k};
    const Eigen::array<Eigen::Index, 2> rk_dims{g.r * g.s * g.k, g.c};
    T2(gx_nhwc, g.n * g.h * g.w, g.c).device(device) =
        gy.extract_image_patches(g.r, g.s, 1, 1, 1, 1, g.stride, g.stride, top, bottom, left, right, 0.f)
            .reshape(gpatch_dims)
            .contract(CT4(reversed_kernel.data(), g.r, g.s, g.k, g.c).reshape(rk_dims), contract_inner);
  }
};

std::vector<float> nchw_to_nhwc(const std::vector<float>& v, int64_t n, int64_t c, int64_t h, int64_t w) {
  std::vector<float> out(v.size());
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < c; ++b)
      for (int64_t i = 0; i < h * w; ++i) out[(a * h * w + i) * c + b] = v[(a * c + b) * h * w + i];
  return out;
}
// [K, C, R, S] -> [R, S, C, K]
std::vector<float> kcrs_to_rsck(const std::vector<float>& v, int64_t k, int64_t c, int64_t r, int64_t s) {
  std::vector<float> out(v.size());
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < c; ++b)
      for (int64_t i = 0; i < r * s; ++i) out[(i * c + b) * k + a] = v[(a * c + b) * r * s + i];
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  liftoff::set_num_threads(threads);
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice device(&pool, threads);
  std::printf(
      "CPU conv2d strategies, f32, %d threads, median of %d runs (ms); f+b = forward + all gradients\n",
      threads, repeats);
  std::printf("%-22s %5s | %9s %9s | %9s %9s | %9s %9s | %s\n", "layer", "batch", "per-image", "f+b",
              "batched", "f+b", "spatial", "f+b", "max |diff| vs library (batched, spatial)");
  double totals[2][3] = {{0, 0, 0}, {0, 0, 0}};
  for (int64_t batch : {128, 16}) {
    for (const Layer& layer : kLayers) {
      Geometry g{batch, layer.c, layer.h, layer.h, layer.k, layer.r, layer.r, 0, 0, layer.stride, layer.pad};
      g.oh = (g.h + 2 * g.pad - g.r) / g.stride + 1;
      g.ow = g.oh;
      liftoff::Generator gen(static_cast<uint64_t>(batch * 100 + layer.c));
      const Tensor x = liftoff::rand_uniform({g.n, g.c, g.h, g.w}, gen, -1, 1).set_requires_grad(true);
      const Tensor w = liftoff::rand_uniform({g.k, g.c, g.r, g.s}, gen, -0.5, 0.5).set_requires_grad(true);
      const Tensor b = liftoff::rand_uniform({g.k}, gen, -1, 1).set_requires_grad(true);
      const Tensor gy = liftoff::rand_uniform({g.n, g.k, g.oh, g.ow}, gen, -1, 1);
      const std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>(),
                               bv = b.to_vector<float>();
      const std::vector<float> gyv = gy.to_vector<float>();

      // Library reference values.
      const Tensor y_ref = liftoff::conv2d(x, w, b, g.stride, g.pad);
      y_ref.backward(gy);
      const std::vector<float> y_lib = y_ref.to_vector<float>(), gx_lib = x.grad().to_vector<float>(),
                               gw_lib = w.grad().to_vector<float>();

      const double lib_fwd = median_ms(repeats, [&] {
        liftoff::NoGradGuard no_grad;
        liftoff::conv2d(x, w, b, g.stride, g.pad);
      });
      const double lib_all = median_ms(repeats, [&] {
        x.set_grad(Tensor());
        w.set_grad(Tensor());
        b.set_grad(Tensor());
        liftoff::conv2d(x, w, b, g.stride, g.pad).backward(gy);
      });

      Batched batched(g);
      std::vector<float> y(y_lib.size()), gx(xv.size()), gw(wv.size()), gb(bv.size());
      batched.forward(xv.data(), wv.data(), bv.data(), y.data());
      batched.backward(wv.data(), gyv.data(), gx.data(), gw.data(), gb.data());
      const double batched_diff =
          std::max({max_abs_diff(y, y_lib), max_abs_diff(gx, gx_lib), max_abs_diff(gw, gw_lib)});
      const double batched_fwd =
          median_ms(repeats, [&] { batched.forward(xv.data(), wv.data(), bv.data(), y.data()); });
      const double batched_all = median_ms(repeats, [&] {
        batched.forward(xv.data(), wv.data(), bv.data(), y.data());
        batched.backward(wv.data(), gyv.data(), gx.data(), gw.data(), gb.data());
      });

      Spatial spatial(g, device);
      const std::vector<float> x_nhwc = nchw_to_nhwc(xv, g.n, g.c, g.h, g.w);
      const std::vector<float> w_rsck = kcrs_to_rsck(wv, g.k, g.c, g.r, g.s);
      const std::vector<float> gy_nhwc = nchw_to_nhwc(gyv, g.n, g.k, g.oh, g.ow);
      std::vector<float> ys(y.size()), gxs(gx.size()), gws(gw.size()), gbs(gb.size());
      spatial.forward(x_nhwc.data(), w_rsck.data(), bv.data(), ys.data());
      spatial.backward(x_nhwc.data(), w_rsck.data(), gy_nhwc.data(), gxs.data(), gws.data(), gbs.data());
      const double spatial_diff = std::max({max_abs_diff(ys, nchw_to_nhwc(y_lib, g.n, g.k, g.oh, g.ow)),
                                            max_abs_diff(gxs, nchw_to_nhwc(gx_lib, g.n, g.c, g.h, g.w)),
                                            max_abs_diff(gws, kcrs_to_rsck(gw_lib, g.k, g.c, g.r, g.s))});
      const double spatial_fwd =
          median_ms(repeats, [&] { spatial.forward(x_nhwc.data(), w_rsck.data(), bv.data(), ys.data()); });
      const double spatial_all = median_ms(repeats, [&] {
        spatial.forward(x_nhwc.data(), w_rsck.data(), bv.data(), ys.data());
        spatial.backward(x_nhwc.data(), w_rsck.data(), gy_nhwc.data(), gxs.data(), gws.data(), gbs.data());
      });

      const int row = batch == 128 ? 0 : 1;
      totals[row][0] += lib_all;
      totals[row][1] += batched_all;
      totals[row][2] += spatial_all;
      std::printf("%-22s %5lld | %9.2f %9.2f | %9.2f %9.2f | %9.2f %9.2f | %.1e, %.1e\n", layer.name,
                  static_cast<long long>(batch), lib_fwd, lib_all, batched_fwd, batched_all, spatial_fwd,
                  spatial_all, batched_diff, spatial_diff);
    }
  }
  for (int row = 0; row < 2; ++row) {
    std::printf("%-22s %5d | %9s %9.2f | %9s %9.2f | %9s %9.2f |\n", "sum of layers (f+b)",
                row == 0 ? 128 : 16, "", totals[row][0], "", totals[row][1], "", totals[row][2]);
  }
  return 0;
}
