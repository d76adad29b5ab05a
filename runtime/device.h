// Where a tensor lives: the CPU or CUDA device `index`. A build without CUDA can name a CUDA device but never
// allocate on one (DeviceError "built without CUDA").
#pragma once
#include <string>

namespace liftoff {

struct Device {
  enum class Type { cpu, cuda };
  Type type = Type::cpu;
  int index = 0;

  static Device cpu() { return Device{Type::cpu, 0}; }
  static Device cuda(int index = 0) { return Device{Type::cuda, index}; }
  bool is_cpu() const { return type == Type::cpu; }
  bool is_cuda() const { return type == Type::cuda; }
  std::string str() const;  // "cpu" or "cuda:N"
  // Parses "cpu", "cuda", "cuda:N"; throws ValueError otherwise. ("auto" is resolved by callers.)
  static Device parse(const std::string& text);

  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
};

// True when this binary was compiled with the CUDA backend.
bool built_with_cuda();

// Blocks the host until all work queued on the device is done (a no-op for the CPU). For timing and shutdown;
// never inside a training step.
void synchronize(Device device);

}  // namespace liftoff
