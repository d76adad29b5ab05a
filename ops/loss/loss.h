// Losses with PyTorch's names, argument order and defaults (torch.nn.functional). Every loss takes
// reduction = "mean" | "sum" | "none" (kl_div also "batchmean"): "none" returns the per-element losses in the
// target's shape, "mean"/"sum" a tensor of shape [] (the mean of an empty input is NaN, its sum 0).
//
// Dtypes: f32/f64 on the CPU; f32/f64/f16/bf16 on CUDA, always computed and reduced in f32 (f64 for f64).
// Input and target of different floating dtypes are promoted to the wider one (bf16 + f32 -> f32); the result
// has that dtype. Under autocast (runtime/autocast.h) f16/bf16 inputs are upcast to f32 first, as PyTorch's
// autocast lists losses as f32 ops: the loss is then f32 and the gradient flows back to the half input.
// Reductions are deterministic (fixed summation order: fixed chunks on the CPU, a two-pass block reduction on
// CUDA, no float atomics). Gradients flow to input and target (nll_loss: input only); weight and pos_weight
// are constants (no gradient), as the buffers of nn.BCEWithLogitsLoss / nn.NLLLoss are.
//
// Differences from PyTorch: a target whose shape differs from the input's is a ShapeError (PyTorch
// broadcasts with a warning, which is nearly always a bug); the deprecated size_average/reduce arguments do
// not exist.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/tensor.h"

namespace liftoff {

// (input - target)^2. Backward: ginput = 2 (input - target) g, gtarget = -ginput.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

// |input - target|. Backward: ginput = sign(input - target) g (0 where equal), gtarget = -ginput.
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

// d = input - target: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta >= 0; beta = 0 is l1_loss).
// Backward: d / beta inside, sign(d) outside.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                      double beta = 1.0);

// d = input - target: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) (delta > 0).
// Backward: d inside, delta sign(d) outside.
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                  double delta = 1.0);

// Negative log-likelihood of log-probabilities: input [N, C], [C] or [N, C, d1, ...]; target [N], [] or
// [N, d1, ...] of class indices (i64, also i32). loss_i = -weight[t_i] * input[i, t_i], 0 where t_i ==
// ignore_index. weight: optional [C] (cast to the input's dtype). "mean" is the weighted mean
// sum_i loss_i / sum_i weight[t_i] over non-ignored i (NaN when all are ignored), as PyTorch.
// Backward: ginput[i, t_i] = -weight[t_i] g_i (divided by the weight sum for "mean"), 0 elsewhere.
// A target outside [0, C) that is not ignore_index: on the CPU a ValueError naming the index and its
// position; on CUDA the indices are never read by the host (no sync), so the loss becomes NaN.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                int64_t ignore_index = -100, const std::string& reduction = "mean");

// Binary cross-entropy on logits x with target t in [0, 1], numerically stable:
// loss = -weight * (pos_weight * t * log sigmoid(x) + (1 - t) * log(1 - sigmoid(x)))
//      = weight * ((1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)).
// weight and pos_weight are optional and broadcast to the input's shape (pos_weight [C] weighs the classes
// of the last dimension). Backward: ginput = weight ((1 - t) - (1 + (pos_weight - 1) t) sigmoid(-x)) g,
// gtarget = weight (-x + (pos_weight - 1) softplus(-x)) g.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = Tensor(),
                                        const std::string& reduction = "mean",
                                        const Tensor& pos_weight = Tensor());

// Kullback-Leibler divergence with input = log-probabilities: target (log_target = false) gives
// t (log t - input) (0 where t = 0); log_target = true gives exp(t) (t - input). reduction "batchmean"
// divides the sum by input.size(0) (the mathematically correct KL; PyTorch's default "mean" divides by
// numel). Backward: ginput = -t g (or -exp(t) g), gtarget = (log t + 1 - input) g (0 where t = 0) or exp(t)
// (t - input + 1) g.
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);

}  // namespace liftoff
