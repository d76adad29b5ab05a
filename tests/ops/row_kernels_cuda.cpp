// The register-tile row kernels of softmax/log_softmax and layer norm (ops/common/row_tile.cuh) and the
// packed column / value-only reductions against the CPU in every dtype: row lengths at and around each
// tile size (a warp per row up to 1024 values, a block up to 8192, the looping kernel beyond), lengths that
// are not a multiple of the 16-byte pack, a misaligned start (scalar loads), many rows; and bit-for-bit
// repeatability.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/layer_norm/layer_norm.h"
#include "ops/reduce/reduce.h"
#include "ops/softmax/softmax.h"
#include "tests/common/cuda_test.h"
#include "tests/ops/dtype_cases.h"

namespace liftoff {
namespace {

// Row lengths at and around every tile (row_tile.cuh): 1, 3, 7, 16 (a thread per row), 17 and 32 (2
// threads), 64 (4), 128 (8: two 16-byte bf16 packs a thread), 129 and 256 (16), 257 and 512 (a warp, 16
// values a thread), 1000 and 1024 (a warp, 32), 1025 and 2052 (2 and 4 warps), 4096 (4 warps), 8192 (a
// block), 8200 (the looping kernel).
const std::vector<int64_t> kRowLengths = {1,   3,   7,    16,   17,   32,   64,   128,  129, 256,
                                          257, 512, 1000, 1024, 1025, 2052, 4096, 8192, 8200};

int64_t rows_for(int64_t cols) {
  if (cols <= 16) return 300;    // 256 rows a block: the second block is partly empty
  return cols >= 4096 ? 3 : 37;  // 37: the last block's groups are partly empty
}

// The softmax and layer norm parity tolerances of their own suites: half results are rounded to 16 bits.
testing::ParityOptions row_options(DType dt, double half_atol, double half_rtol, bool grads = true) {
  testing::ParityOptions o;
  o.cuda_dtype = dt;
  o.check_grads = grads;
  const bool half = dt == DType::f16 || dt == DType::bf16;
  o.atol = half ? half_atol : (dt == DType::f64 ? 1e-10 : 1e-5);
  o.rtol = half ? half_rtol : (dt == DType::f64 ? 1e-10 : 1e-4);
  return o;
}

// A contiguous [rows, cols] view starting one element into the storage: dense but misaligned on the device.
Tensor shifted(const Tensor& t, int64_t rows, int64_t cols) {
  return t.view({t.numel()}).slice(0, 1, 1 + rows * cols).view({rows, cols});
}

TEST(RowKernelsCuda, SoftmaxAndLogSoftmaxMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t cols : kRowLengths) {
    const int64_t rows = rows_for(cols);
    for (const testing::DtypeCase& d : testing::all_dtype_cases()) {
      const Tensor x = testing::random_tensor({rows, cols}, 1, -4, 4, d.cpu_dtype()).set_requires_grad(true);
      for (bool log : {false, true}) {
        // log_softmax values reach |log(8200) + 8|: the relative tolerance covers them. Its gradient
        // gy - exp(y) * sum(gy) reads y as stored: in bf16 (8 mantissa bits) a y near -8 carries ~3% error
        // into exp(y); the looping kernel (8200 columns) lands on the same values as the register tile.
        EXPECT_TRUE(testing::cuda_parity(
            [log](const std::vector<Tensor>& in) {
              return log ? log_softmax(in[0], -1) : softmax(in[0], -1);
            },
            {x}, row_options(d.dtype, log ? 1e-1 : 2e-2, 2e-2)))
            << (log ? "log_softmax " : "softmax ") << cols << " " << d.name();
      }
    }
  }
}

TEST(RowKernelsCuda, SoftmaxMisalignedRows) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t cols : {16, 64, 128, 1024, 4096, 8192}) {
    for (const testing::DtypeCase& d : testing::all_dtype_cases()) {
      // The CPU reference in the case's dtype (f64 for f64: an f32 reference is off by 1e-8).
      const Tensor x =
          testing::random_tensor({5 * cols + 1}, 2, -3, 3, d.cpu_dtype()).set_requires_grad(true);
      EXPECT_TRUE(testing::cuda_parity(
          [cols](const std::vector<Tensor>& in) { return softmax(shifted(in[0], 5, cols), 1); }, {x},
          row_options(d.dtype, 2e-2, 2e-2)))
          << cols << " " << d.name();
    }
  }
}

TEST(RowKernelsCuda, SoftmaxPropagatesNaN) {
  LIFTOFF_REQUIRE_CUDA();
  std::vector<float> values(2 * 256, 0.5f);
  values[7] = NAN;
  const Tensor x = Tensor::from_vector<float>(values, {2, 256}, Device::cuda());
  const std::vector<float> y = softmax(x, 1).to_vector<float>();
  for (int i = 0; i < 256; ++i) EXPECT_TRUE(std::isnan(y[static_cast<size_t>(i)])) << i;
  for (int i = 256; i < 512; ++i) EXPECT_FLOAT_EQ(y[static_cast<size_t>(i)], 1.0f / 256);
}

TEST(RowKernelsCuda, LayerNormMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t cols : kRowLengths) {
    if (cols == 1) continue;  // a single value normalises to 0: nothing to compare beyond the bias
    const int64_t rows = rows_for(cols);
    for (const testing::DtypeCase& d : testing::all_dtype_cases()) {
      const double half_atol = d.dtype == DType::bf16 ? 6e-2 : 2e-2;
      const double half_rtol = d.dtype == DType::bf16 ? 5e-2 : 2e-2;
      auto input = [&](const Shape& shape, uint64_t seed, double low, double high) {
        // Rounded to the device dtype first, so both sides normalise the same values.
        return testing::random_tensor(shape, seed, low, high, d.cpu_dtype()).to(d.dtype).to(d.cpu_dtype());
      };
      const Tensor x = input({rows, cols}, 3, -2, 3).set_requires_grad(true);
      const Tensor w = input({cols}, 4, 0.5, 1.5).set_requires_grad(true);
      const Tensor b = input({cols}, 5, -1, 1).set_requires_grad(true);
      // The weight/bias gradients sum rounded 16-bit gradients over the rows: compared in f32/f64 only.
      const bool half = d.dtype == DType::f16 || d.dtype == DType::bf16;
      EXPECT_TRUE(testing::cuda_parity(
          [cols](const std::vector<Tensor>& in) { return layer_norm(in[0], {cols}, in[1], in[2]); },
          {x, w, b}, row_options(d.dtype, half_atol, half_rtol, !half)))
          << cols << " " << d.name();
      if (half) {
        EXPECT_TRUE(
            testing::cuda_parity([cols](const std::vector<Tensor>& in) { return layer_norm(in[0], {cols}); },
                                 {x}, row_options(d.dtype, half_atol, half_rtol)))
            << "input gradient " << cols << " " << d.name();
      }
    }
  }
}

// The fused backward (gx, and the weight/bias gradients through per-block partial sums): many rows, so each
// group of the one-wave grid visits several rows (and the last round leaves groups idle); every tile of
// the fused dispatch (8 values a thread up to 2048 columns, 16 up to 4096) and the unfused path beyond.
TEST(RowKernelsCuda, LayerNormFusedBackwardOverManyRows) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t cols : {7, 64, 100, 256, 512, 768, 1024, 2048, 3000, 4096, 4104}) {
    const int64_t rows = cols >= 2048 ? 1500 : 5003;
    const Tensor x = testing::random_tensor({rows, cols}, 12, -2, 3, DType::f32).set_requires_grad(true);
    const Tensor w = testing::random_tensor({cols}, 13, 0.5, 1.5, DType::f32).set_requires_grad(true);
    const Tensor b = testing::random_tensor({cols}, 14, -1, 1, DType::f32).set_requires_grad(true);
    // The weight gradient sums thousands of rows: f32 sums in another order differ by ~1e-6 relative.
    EXPECT_TRUE(testing::cuda_parity(
        [cols](const std::vector<Tensor>& in) { return layer_norm(in[0], {cols}, in[1], in[2]); }, {x, w, b},
        {2e-4, 2e-4}))
        << cols;
  }
}

// 16-bit storage: the weight/bias gradients are f32 sums rounded once at the end; compared against the CPU
// on the same rounded inputs and incoming gradient, within a few bf16 roundings of the result.
// Also: 5003 rows (several rounds of the one-wave grid, each fetching the next round's rows while it
// reduces, the last round partly idle) and a misaligned x (scalar loads of the same kernels).
TEST(RowKernelsCuda, LayerNormFusedBackwardBf16AffineGradients) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t cols : {64, 1024, 4096})
    for (int64_t rows : {2001, 5003})
      for (bool misaligned : {false, true}) {
        auto rounded = [](const Shape& shape, uint64_t seed, double low, double high) {
          return testing::random_tensor(shape, seed, low, high, DType::f32).to(DType::bf16).to(DType::f32);
        };
        const Tensor x = rounded({rows, cols}, 15, -2, 2), gy = rounded({rows, cols}, 16, -1, 1);
        const Tensor w = rounded({cols}, 17, 0.5, 1.5), b = rounded({cols}, 18, -1, 1);
        auto grads = [&](Device device, DType dtype) {
          Tensor xd = x.to(device, dtype);
          if (misaligned) {
            // The same values one element into a larger buffer.
            Tensor buffer = Tensor::zeros({rows * cols + 1}, dtype, device);
            buffer.slice(0, 1, 1 + rows * cols).copy_(xd.view({rows * cols}));
            xd = shifted(buffer, rows, cols);
          }
          xd = xd.detach().set_requires_grad(true);
          const Tensor wd = w.to(device, dtype).detach().set_requires_grad(true);
          const Tensor bd = b.to(device, dtype).detach().set_requires_grad(true);
          layer_norm(xd, {cols}, wd, bd).backward(gy.to(device, dtype));
          return std::vector<Tensor>{wd.grad().to(Device::cpu(), DType::f32),
                                     bd.grad().to(Device::cpu(), DType::f32),
                                     xd.grad().to(Device::cpu(), DType::f32)};
        };
        const std::vector<Tensor> expected = grads(Device::cpu(), DType::f32);
        const std::vector<Tensor> got = grads(Device::cuda(), DType::bf16);
        // The CPU normalises in f32 from the same values: the sums differ by bf16's final rounding (2^-8) and
        // the device's rounded xhat is not involved (the partial sums stay f32).
        const std::string where =
            std::to_string(rows) + " x " + std::to_string(cols) + (misaligned ? " misaligned" : "");
        EXPECT_TRUE(testing::all_close(got[0], expected[0], 5e-2, 8e-3)) << "weight " << where;
        EXPECT_TRUE(testing::all_close(got[1], expected[1], 5e-2, 8e-3)) << "bias " << where;
        EXPECT_TRUE(testing::all_close(got[2], expected[2], 5e-2, 5e-2)) << "input " << where;
      }
}

TEST(RowKernelsCuda, LayerNormMisalignedRows) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t cols : {64, 256, 2048, 4096}) {
    const Tensor x = testing::random_tensor({6 * cols + 1}, 6, -2, 2, DType::f32).set_requires_grad(true);
    const Tensor w = testing::random_tensor({cols}, 7, 0.5, 1.5, DType::f32).set_requires_grad(true);
    EXPECT_TRUE(testing::cuda_parity(
        [cols](const std::vector<Tensor>& in) { return layer_norm(shifted(in[0], 6, cols), {cols}, in[1]); },
        {x, w}, {1e-4, 1e-4}))
        << cols;
  }
}

TEST(RowKernelsCuda, PackedColumnReductionsMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  // Columns a multiple of every pack (16-byte loads), odd columns, and a misaligned start.
  // 4099 x 520: a split extent whose chunks are not a multiple of the rows a thread has in flight.
  for (const Shape& shape : {Shape{300, 64}, Shape{300, 63}, Shape{5000, 264}, Shape{4099, 520}}) {
    for (const testing::DtypeCase& d : testing::all_dtype_cases()) {
      const Tensor x32 = testing::random_tensor(shape, 8, -1, 1, DType::f32);
      const Tensor x = (d.dtype == DType::f64 ? x32.to(DType::f64) : x32.to(d.dtype).to(DType::f32))
                           .set_requires_grad(true);
      testing::ParityOptions options = d.options(false);
      options.atol = options.rtol = d.dtype == DType::f64 ? 1e-10 : 2e-2;  // half results are rounded sums
      if (d.dtype == DType::f32) options.atol = options.rtol = 2e-4;
      for (const char* op : {"sum", "var", "amax", "amin", "logsumexp"}) {
        const std::string name = op;
        EXPECT_TRUE(testing::cuda_parity(
            [name](const std::vector<Tensor>& in) {
              if (name == "sum") return sum(in[0], {0});
              if (name == "var") return var(in[0], {0});
              if (name == "amax") return amax(in[0], {0});
              if (name == "amin") return amin(in[0], {0});
              return logsumexp(in[0], {0});
            },
            {x}, options))
            << op << " " << shape_str(shape) << " " << d.name();
      }
    }
  }
  const Tensor x = testing::random_tensor({64 * 33 + 1}, 9, -1, 1, DType::f32);
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) { return sum(shifted(in[0], 64, 33), {0}); }, {x}, {1e-4, 1e-4}));
  // Misaligned bf16 columns (no packs), many rows: the unpacked kernel with rows in flight and splits.
  const Tensor y =
      testing::random_tensor({3001 * 40 + 1}, 19, -1, 1, DType::f32).to(DType::bf16).to(DType::f32);
  testing::ParityOptions half;
  half.cuda_dtype = DType::bf16;
  half.check_grads = false;
  half.atol = half.rtol = 2e-2;
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) { return amin(shifted(in[0], 3001, 40), {0}); }, {y}, half));
}

TEST(RowKernelsCuda, ValueOnlyExtremesKeepNaNAndMatchMax) {
  LIFTOFF_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16}) {
    std::vector<float> values(4 * 96);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 37) % 101) - 50.0f;
    values[5] = NAN;        // row 0
    values[96 + 40] = NAN;  // row 1, also column 40 of the column reduction below
    const Tensor x = Tensor::from_vector<float>(values, {4, 96}, Device::cuda()).to(dt);
    const std::vector<float> rows = amax(x, {1}).to(DType::f32).to_vector<float>();
    EXPECT_TRUE(std::isnan(rows[0]) && std::isnan(rows[1])) << dtype_name(dt);
    EXPECT_EQ(rows[2], max(x, 1).first.to(DType::f32).to_vector<float>()[2]) << dtype_name(dt);
    EXPECT_EQ(amin(x, {1}).to(DType::f32).to_vector<float>()[3],
              min(x, 1).first.to(DType::f32).to_vector<float>()[3]);
    const std::vector<float> cols = amax(x, {0}).to(DType::f32).to_vector<float>();
    EXPECT_TRUE(std::isnan(cols[5]) && std::isnan(cols[40]) && !std::isnan(cols[6])) << dtype_name(dt);
    const std::vector<float> maxima = max(x, 0).first.to(DType::f32).to_vector<float>();
    for (size_t c = 0; c < cols.size(); ++c) {
      EXPECT_TRUE(cols[c] == maxima[c] || (std::isnan(cols[c]) && std::isnan(maxima[c]))) << c;
    }
  }
}

TEST(RowKernelsCuda, BitForBitRepeatable) {
  LIFTOFF_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = testing::random_tensor({512, 1024}, 10, -3, 3, DType::f32, Device::cuda()).to(dt);
    const Tensor w = testing::random_tensor({1024}, 11, 0.5, 1.5, DType::f32, Device::cuda()).to(dt);
    auto bits = [](const Tensor& t) { return t.to(DType::f32).to_vector<float>(); };
    const auto s = bits(softmax(x, -1));
    const auto l = bits(layer_norm(x, {1024}, w));
    const auto c = bits(sum(x, {0}));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(bits(softmax(x, -1)), s) << dtype_name(dt);
      EXPECT_EQ(bits(layer_norm(x, {1024}, w)), l) << dtype_name(dt);
      EXPECT_EQ(bits(sum(x, {0})), c) << dtype_name(dt);
    }
  }
}

}  // namespace
}  // namespace liftoff
