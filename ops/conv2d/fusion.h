// Folding a user's relu into a convolution's bias add, without special calls.
//
// On CUDA (LIFTOFF_CONV_BIAS_RELU=auto), conv2d() with a bias writes the convolution at once but defers the
// bias add (runtime/deferred.h): its output is handed out without the bias. relu(y) looks at its operand
// first: when it is such a pending output (whole, not a view), one pass writes relu(y + bias) into a fresh
// tensor and relu records its usual node (its backward reads only the output, never y), so `relu(conv(x))`
// reads and writes the activation once instead of twice. Anyone else who reads y (a view, another op, a copy
// to the host, autograd's flush before backward) issues the bias add first and sees conv(x) + bias. The CPU
// path stays unfused: it is the reference.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// relu(y)'s value when y is a pending convolution output (whole, not a view), computed in one pass with the
// bias add, in y's layout; undefined otherwise. The caller (relu) records the node.
Tensor fold_relu_into_conv_bias(const Tensor& y);

namespace detail {
// Whether the conv2d front defers the bias add of an output on x's device (CUDA, with the setting on).
bool conv_defers_bias(const Tensor& x);
// y (the convolution written, its bias not added yet) becomes the pending output of y + bias.
void defer_conv_bias(const Tensor& y, const Tensor& bias, bool channels_last);
}  // namespace detail

}  // namespace liftoff
