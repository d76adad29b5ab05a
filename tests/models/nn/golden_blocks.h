// The blocks tools/reference/golden_blocks.py dumps from PyTorch, built from Liftoff's layers, and one
// training-mode step of them checked against the dump: shared by golden_blocks_test.cpp (CPU, f64 and f32)
// and golden_blocks_cuda.cpp (CUDA, f32).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/layers.h"
#include "models/nn/mobilenet.h"
#include "ops/ops.h"
#include "tests/models/nn/golden_file.h"

namespace liftoff::testing {

// Each bound is on max |ours - torch| / max |torch| over one tensor (relative_error).
struct GoldenTolerances {
  double output = 0, loss = 0, grad = 0, running_stat = 0;
};

struct GoldenBlock {
  std::string name;  // the test's suffix
  std::string file;  // under tests/models/nn/data
  std::function<std::shared_ptr<Module>(Generator&)> build;
  // CUDA f32 against the f64 dump: cuBLAS matmuls run in plain f32, but cuDNN convolutions may use TF32
  // (10-bit mantissa, as PyTorch allows by default), so the conv blocks get a looser bound. Calibration:
  // PyTorch with every conv operand rounded to TF32 (forward and both backward convs) is off the f64 dump by
  // 1.5e-3 (output) and 5.6e-3 (worst gradient, a BN weight) on the MobileNet blocks.
  GoldenTolerances cuda;
};

// gtest prints a parameter by its name, not its bytes.
inline void PrintTo(const GoldenBlock& block, std::ostream* os) {
  *os << block.name;
}

inline std::vector<GoldenBlock> golden_blocks() {
  // The shapes golden_blocks.py uses: d_model 16, 4 heads, feed-forward 32;
  // InvertedResidual(8, 8, 2, 6) followed by InvertedResidual(8, 8, 1, 6) (with its residual).
  const GoldenTolerances plain_f32{1e-4, 1e-4, 1e-3, 1e-4};
  const GoldenTolerances tf32{5e-3, 5e-3, 2e-2, 5e-3};
  return {
      {"TransformerPreNorm", "golden_transformer_prenorm.bin",
       [](Generator& gen) {
         return std::make_shared<TransformerEncoderLayer>(16, 4, gen, 32, 0.0, "gelu", 1e-5, true);
       },
       plain_f32},
      {"TransformerPostNorm", "golden_transformer_postnorm.bin",
       [](Generator& gen) {
         return std::make_shared<TransformerEncoderLayer>(16, 4, gen, 32, 0.0, "relu", 1e-5, false);
       },
       plain_f32},
      {"MobileNetInvertedResiduals", "golden_mobilenet_blocks.bin",
       [](Generator& gen) {
         auto blocks = std::make_shared<Sequential>();
         blocks->push_back(std::make_shared<InvertedResidual>(8, 8, 2, 6, gen));
         blocks->push_back(std::make_shared<InvertedResidual>(8, 8, 1, 6, gen));
         return blocks;
       },
       tf32},
  };
}

// A golden file by name ("input", "param.<name>", ...) and the state before the step in file (state_dict)
// order with the "param." / "buffer." prefixes stripped.
struct GoldenDump {
  std::map<std::string, Tensor> tensors;
  StateDict initial_state;

  explicit GoldenDump(const std::string& file) {
    for (const auto& [name, t] : read_golden(golden_path(file))) {
      tensors[name] = t;
      if (name.rfind("param.", 0) == 0) initial_state.emplace_back(name.substr(6), t);
      if (name.rfind("buffer.", 0) == 0) initial_state.emplace_back(name.substr(7), t);
    }
  }
  const Tensor& at(const std::string& name) const {
    const auto it = tensors.find(name);
    LIFTOFF_CHECK(it != tensors.end(), IOError, "golden file has no tensor \"", name,
                  "\" (regenerate it with tools/reference/golden_blocks.py)");
    return it->second;
  }
};

// Builds the block on `device` in `dtype`, loads PyTorch's initial state, runs forward and backward of
// sum(output * loss_weight) in training mode, and checks the output, the loss, every parameter's and the
// input's gradient and the buffers after the step (num_batches_tracked exactly) against the dump.
inline void expect_step_matches_golden(const GoldenBlock& block, Device device, DType dtype,
                                       const GoldenTolerances& tol) {
  const GoldenDump golden(block.file);
  Generator gen(7);
  const std::shared_ptr<Module> module = block.build(gen);
  module->to(device, dtype);
  module->load_state_dict(golden.initial_state);
  module->train();

  const Tensor x = golden.at("input").to(device, dtype).clone();
  x.set_requires_grad(true);
  const Tensor output = module->forward(x);
  const Tensor loss = sum(mul(output, golden.at("loss_weight").to(device, dtype)));
  loss.backward();

  const double output_err = relative_error(output, golden.at("output"));
  const double loss_err = relative_error(loss, golden.at("loss"));
  EXPECT_LE(output_err, tol.output);
  EXPECT_LE(loss_err, tol.loss);
  ASSERT_TRUE(x.grad().defined());
  double worst_grad = relative_error(x.grad(), golden.at("grad.input"));
  EXPECT_LE(worst_grad, tol.grad) << "grad.input";
  std::string worst_grad_name = "input";
  for (const auto& [name, p] : module->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const double err = relative_error(p.grad(), golden.at("grad." + name));
    EXPECT_LE(err, tol.grad) << "grad." << name;
    if (err > worst_grad) worst_grad = err, worst_grad_name = name;
  }
  double worst_stat = 0;
  for (const auto& [name, b] : module->named_buffers()) {
    const Tensor& expected = golden.at("after." + name);
    if (b.dtype() == DType::i64) {
      EXPECT_EQ(b.to(Device::cpu()).to_vector<int64_t>(), expected.to_vector<int64_t>()) << name;
      continue;
    }
    const double err = relative_error(b, expected);
    EXPECT_LE(err, tol.running_stat) << "after." << name;
    worst_stat = std::max(worst_stat, err);
  }
  std::cout << "[golden] " << block.name << " on " << device.str() << " in " << dtype_name(dtype)
            << ": max relative error: output " << output_err << ", loss " << loss_err << ", gradients "
            << worst_grad << " (" << worst_grad_name << "), running stats " << worst_stat << "\n";
}

}  // namespace liftoff::testing
