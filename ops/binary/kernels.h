// Kernels behind the binary ops: operands already promoted to one dtype (y's), the plan built by the front
// over the tensor operands in order (a, b) / (gy, a, b); a constant operand has no tensor.
#pragma once
#include "ops/binary/functors.h"
#include "ops/common/elementwise.h"
#include "runtime/tensor.h"

namespace liftoff {

namespace cpu {
void binary_forward(BinaryOp op, double alpha, const ElementwisePlan& plan, const ElementOperand& a,
                    const ElementOperand& b, const Tensor& y);
// g = BinaryGrad<op, which>(gy, a, b) over the plan.
void binary_backward(BinaryOp op, int which, double alpha, const ElementwisePlan& plan, const Tensor& gy,
                     const ElementOperand& a, const ElementOperand& b, const Tensor& g);
}  // namespace cpu
namespace cuda {
void binary_forward(BinaryOp op, double alpha, const ElementwisePlan& plan, const ElementOperand& a,
                    const ElementOperand& b, const Tensor& y);
void binary_backward(BinaryOp op, int which, double alpha, const ElementwisePlan& plan, const Tensor& gy,
                     const ElementOperand& a, const ElementOperand& b, const Tensor& g);
}  // namespace cuda
}  // namespace liftoff
