// A CPU-only program against the installed Liftoff: a matmul with its gradient on the CPU, then what `cuda`
// and the distributed backends say on this machine. It prints one line per check for the test script, and
// which vendor libraries the process has mapped (a CPU run must map none).
//   cpu_consumer [--mpi]
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "liftoff.h"

namespace {

// Vendor libraries mapped into this process (from /proc/self/maps), e.g. "libcublas.so.13".
std::vector<std::string> mapped_vendor_libraries() {
  std::vector<std::string> found;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    for (const char* name : {"libcudart", "libcublas", "libcudnn", "libnccl", "libmpi"}) {
      if (line.find(std::string("/") + name) == std::string::npos) continue;
      const std::string file = line.substr(line.find_last_of('/') + 1);
      bool seen = false;
      for (const auto& f : found) seen = seen || f == file;
      if (!seen) found.push_back(file);
    }
  }
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace liftoff;
  const bool try_mpi = argc > 1 && std::string(argv[1]) == "--mpi";
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({5, 6, 7, 8}, {2, 2});
  a.set_requires_grad(true);
  Tensor total = sum(matmul(a, b));
  total.backward();
  const std::vector<float> grad = a.grad().to_vector<float>();
  // d sum(a @ b) / d a = ones @ b^T: every row is (5 + 6, 7 + 8).
  std::cout << "cpu: sum(a @ b) = " << total.item() << ", grad a = " << grad[0] << " " << grad[1] << " "
            << grad[2] << " " << grad[3] << "\n";

  const std::string reason = cuda_unavailable_reason(0);
  std::cout << (reason.empty() ? std::string("cuda: usable") : "cuda: not available: " + reason) << "\n";
  try {
    const Tensor on_gpu = Tensor::ones({2}, DType::f32, resolve_device("cuda").device);
    std::cout << "cuda: sum(ones(2)) = " << sum(on_gpu).item() << "\n";
  } catch (const Error& e) {
    std::cout << "cuda: refused: " << e.what() << "\n";
  }

  if (try_mpi) {  // one rank of one: needs MPI (libmpi) at run time only
    try {
      auto group = distributed::make_process_group(distributed::Backend::mpi, 0, 1);
      std::cout << "mpi: " << group->describe() << "\n";
    } catch (const Error& e) {
      std::cout << "mpi: refused: " << e.what() << "\n";
    }
  }

  std::cout << "mapped vendor libraries:";
  for (const auto& name : mapped_vendor_libraries()) std::cout << " " << name;
  std::cout << "\n";
  return 0;
}
