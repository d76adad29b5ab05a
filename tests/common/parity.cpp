#include "tests/common/parity.h"

#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/caching_allocator.h"
#endif

namespace liftoff::testing {

::testing::AssertionResult cuda_parity(const TensorFn& fn, const std::vector<Tensor>& cpu_inputs,
                                       const ParityOptions& options) {
#if LIFTOFF_WITH_CUDA
  std::vector<Tensor> device_inputs;
  for (const Tensor& t : cpu_inputs) {
    if (!t.defined()) {
      device_inputs.emplace_back();
      continue;
    }
    const DType dt = is_floating(t.dtype()) ? options.cuda_dtype : t.dtype();
    Tensor d = t.detach().to(Device::cuda(0), dt);
    if (t.requires_grad()) d.set_requires_grad(true);
    device_inputs.push_back(d);
  }
  for (const Tensor& t : cpu_inputs) {
    if (t.defined() && t.requires_grad()) t.set_grad(Tensor());
  }
  cuda::CachingAllocator::get().set_poison(true);
  struct Unpoison {
    ~Unpoison() { cuda::CachingAllocator::get().set_poison(false); }
  } unpoison;

  const Tensor cpu_out = fn(cpu_inputs);
  const Tensor cuda_out = fn(device_inputs);
  auto result = all_close(cuda_out.to(Device::cpu(), cpu_out.dtype()), cpu_out, options.atol, options.rtol);
  if (!result) return ::testing::AssertionFailure() << "forward: " << result.message();
  if (!options.check_grads || !cpu_out.requires_grad()) return ::testing::AssertionSuccess();

  const Tensor weights = random_tensor(cpu_out.shape(), 777, 0.5, 1.5, cpu_out.dtype());
  cpu_out.backward(weights);
  cuda_out.backward(weights.to(Device::cuda(0), cuda_out.dtype()));
  for (size_t i = 0; i < cpu_inputs.size(); ++i) {
    if (!cpu_inputs[i].defined() || !cpu_inputs[i].requires_grad()) continue;
    const Tensor g_cpu = cpu_inputs[i].grad();
    const Tensor g_cuda = device_inputs[i].grad();
    if (!g_cuda.defined()) return ::testing::AssertionFailure() << "input " << i << ": no CUDA gradient";
    auto r = all_close(g_cuda.to(Device::cpu(), g_cpu.dtype()), g_cpu, options.atol, options.rtol);
    if (!r) return ::testing::AssertionFailure() << "gradient of input " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
#else
  (void)fn;
  (void)cpu_inputs;
  (void)options;
  return ::testing::AssertionFailure() << "cuda_parity called in a build without CUDA";
#endif
}

}  // namespace liftoff::testing
