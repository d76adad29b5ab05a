// NVML, loaded with dlopen so that a machine without the NVIDIA driver simply has "no NVML" (never a
// failure). Only the few calls Liftoff reads are bound; they are all cheap and safe to call from a sampler
// thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace liftoff {

struct GpuSample {
  bool valid = false;
  unsigned utilization_gpu = 0;     // % of time a kernel was running over the driver's sample period
  unsigned utilization_memory = 0;  // % of time device memory was read or written
  uint64_t memory_used = 0;         // bytes
  uint64_t memory_total = 0;
  unsigned sm_clock_mhz = 0;
  unsigned power_mw = 0;
};

struct GpuProcess {
  unsigned pid = 0;
  uint64_t memory_used = 0;  // bytes; 0 when the driver does not say
};

class Nvml {
 public:
  // The process-wide instance; available() is false without a driver.
  static Nvml& get();
  bool available() const;
  // Why not available ("libnvidia-ml.so.1 not found", ...).
  std::string unavailable_reason() const;
  std::string driver_version() const;
  unsigned device_count() const;
  // NVML index of the device with this PCI bus id (as cudaDeviceGetPCIBusId gives it), or -1.
  int index_by_pci_bus_id(const std::string& bus_id) const;
  GpuSample sample(unsigned index) const;
  std::vector<GpuProcess> compute_processes(unsigned index) const;

  ~Nvml();

 private:
  Nvml();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace liftoff
