// custom_op: an op with its own forward and backward (swish.h), checked the way Liftoff checks its own ops:
// gradients against central differences (liftoff::gradcheck, f64 on the CPU), and, where a GPU is usable,
// the CUDA kernels against the CPU ones. Then the op inside a Module with a learnable parameter.
//
//   custom_op      exit status 0 when every check passed, 1 otherwise
#include <cmath>
#include <cstdio>
#include <memory>

#include "liftoff.h"
#include "swish.h"

namespace {

using namespace liftoff;

// The op as a layer: beta is a parameter, so optimizers and state_dict() see it ("beta").
class Swish : public Module {
 public:
  explicit Swish(double beta) : beta_(register_parameter("beta", Tensor::full({1}, beta))) {}
  Tensor forward(const Tensor& x) override { return example::swish(x, beta_); }
  std::string type_name() const override { return "Swish"; }
  const Tensor& beta() const { return beta_; }

 private:
  Tensor beta_;
};

bool report(const char* what, bool passed, const std::string& detail) {
  std::printf("%s %s%s%s\n", passed ? "ok  " : "FAIL", what, detail.empty() ? "" : ": ", detail.c_str());
  return passed;
}

// d/dx and d/dbeta of sum(r * swish(x, beta)) against central differences, for beta negative, zero-ish and
// positive (the sigmoid's slope changes sign with beta).
bool check_gradients() {
  bool all_passed = true;
  Generator gen(1);
  for (double beta_value : {-1.5, 0.01, 0.8}) {
    const Tensor x = rand_uniform({4, 5}, gen, -3.0, 3.0, DType::f64).set_requires_grad(true);
    const Tensor beta = Tensor::full({1}, beta_value, DType::f64).set_requires_grad(true);
    const GradcheckResult result =
        gradcheck([](const std::vector<Tensor>& in) { return example::swish(in[0], in[1]); }, {x, beta});
    all_passed &= report(str_cat("gradcheck, beta ", beta_value).c_str(), result.passed, result.message);
  }
  return all_passed;
}

// Forward and both gradients on cuda:0 (f32) against the CPU (f64), when a GPU is usable.
bool check_cuda() {
  const std::string unavailable = cuda_unavailable_reason(0);
  if (!unavailable.empty()) {
    std::printf("skip CUDA kernels vs CPU: %s\n", unavailable.c_str());
    return true;
  }
  Generator gen(2);
  const Tensor x_cpu = rand_uniform({3, 1000}, gen, -4.0, 4.0, DType::f64).set_requires_grad(true);
  const Tensor beta_cpu = Tensor::full({1}, 1.3, DType::f64).set_requires_grad(true);
  const Tensor x_cuda = x_cpu.detach().to(Device::cuda(0), DType::f32).set_requires_grad(true);
  const Tensor beta_cuda = beta_cpu.detach().to(Device::cuda(0), DType::f32).set_requires_grad(true);
  const Tensor weights = rand_uniform({3, 1000}, gen, 0.5, 1.5, DType::f64);
  const Tensor y_cpu = example::swish(x_cpu, beta_cpu);
  const Tensor y_cuda = example::swish(x_cuda, beta_cuda);
  y_cpu.backward(weights);
  y_cuda.backward(weights.to(Device::cuda(0), DType::f32));
  // f32 against f64: a few ulp of f32 per element; beta's gradient sums 3000 of them.
  bool passed = report("CUDA forward vs CPU", closeness(y_cuda, y_cpu, 1e-5, 1e-5) <= 1.0, "");
  passed &=
      report("CUDA gradient of x vs CPU", closeness(x_cuda.grad(), x_cpu.grad(), 1e-5, 1e-5) <= 1.0, "");
  passed &=
      report("CUDA gradient of beta vs CPU", closeness(beta_cuda.grad(), beta_cpu.grad(), 1e-3, 1e-4) <= 1.0,
             str_cat(beta_cuda.grad().item(), " vs ", beta_cpu.grad().item()));
  return passed;
}

// The op in a layer: one forward and backward, and beta receives its gradient like any parameter.
bool check_module() {
  Swish layer(1.0);
  Generator gen(3);
  const Tensor x = rand_uniform({8, 16}, gen, -2.0, 2.0);
  mean(layer(x)).backward();
  const Tensor grad = layer.beta().grad();
  const bool passed = grad.defined() && std::isfinite(grad.item()) && layer.named_parameters().size() == 1 &&
                      layer.named_parameters()[0].first == "beta";
  return report("Swish module: beta is a parameter and gets a gradient", passed,
                grad.defined() ? str_cat("d mean / d beta = ", grad.item()) : "no gradient");
}

// A wrong argument is an error naming the op and what is wrong, never a crash in a kernel.
bool check_errors() {
  try {
    example::swish(Tensor::zeros({2, 3}), Tensor::zeros({2}));
  } catch (const ShapeError& e) {
    return report("argument check", true, e.what());
  }
  return report("argument check", false, "a two-element beta was accepted");
}

}  // namespace

int main() {
  try {
    bool passed = check_gradients();
    passed &= check_cuda();
    passed &= check_module();
    passed &= check_errors();
    std::printf(passed ? "custom_op: all checks passed\n" : "custom_op: some checks FAILED\n");
    return passed ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_op: %s\n", e.what());
    return 1;
  }
}
