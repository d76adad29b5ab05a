#include "runtime/profile/nvml.h"

#include "runtime/platform/dynamic_library.h"

namespace liftoff {

namespace {
// The subset of nvml.h we call, declared here so the build needs no driver headers.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlProcessInfo {  // nvmlProcessInfo_v2_t layout
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr int kNvmlClockSm = 1;
}  // namespace

struct Nvml::Impl {
  platform::DynamicLibrary lib{{"libnvidia-ml.so.1", "libnvidia-ml.so"}};
  bool ok = false;
  std::string reason;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*index_of)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, NvmlUtilization*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, NvmlProcessInfo*) = nullptr;

  template <class F>
  bool bind(F& fn, const char* name) {
    fn = reinterpret_cast<F>(lib.symbol(name));
    return fn != nullptr;
  }

  nvmlDevice_t device(unsigned index) const {
    nvmlDevice_t d = nullptr;
    return ok && by_index(index, &d) == 0 ? d : nullptr;
  }
};

Nvml& Nvml::get() {
  static Nvml instance;
  return instance;
}

Nvml::Nvml() : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (!m.lib.loaded()) {
    m.reason = "NVML not available (libnvidia-ml.so.1 not found: no NVIDIA driver)";
    return;
  }
  const bool bound =
      m.bind(m.init, "nvmlInit_v2") && m.bind(m.shutdown, "nvmlShutdown") &&
      m.bind(m.driver_version, "nvmlSystemGetDriverVersion") && m.bind(m.count, "nvmlDeviceGetCount_v2") &&
      m.bind(m.by_index, "nvmlDeviceGetHandleByIndex_v2") &&
      m.bind(m.by_pci, "nvmlDeviceGetHandleByPciBusId_v2") && m.bind(m.index_of, "nvmlDeviceGetIndex") &&
      m.bind(m.utilization, "nvmlDeviceGetUtilizationRates") && m.bind(m.memory, "nvmlDeviceGetMemoryInfo") &&
      m.bind(m.clock, "nvmlDeviceGetClockInfo") && m.bind(m.power, "nvmlDeviceGetPowerUsage");
  if (!bound) {
    m.reason = "NVML is too old (a required function is missing)";
    return;
  }
  // Older drivers lack the _v2 process query; the count-only path still works without it.
  if (!m.bind(m.processes, "nvmlDeviceGetComputeRunningProcesses_v2")) m.processes = nullptr;
  const nvmlReturn_t rc = m.init();
  if (rc != 0) {
    m.reason = "NVML failed to initialise (error " + std::to_string(rc) + ")";
    return;
  }
  m.ok = true;
}

Nvml::~Nvml() {
  if (impl_ && impl_->ok) impl_->shutdown();
}

bool Nvml::available() const {
  return impl_->ok;
}
std::string Nvml::unavailable_reason() const {
  return impl_->reason;
}

std::string Nvml::driver_version() const {
  char buf[96] = {0};
  return impl_->ok && impl_->driver_version(buf, sizeof buf) == 0 ? std::string(buf) : std::string();
}

unsigned Nvml::device_count() const {
  unsigned n = 0;
  return impl_->ok && impl_->count(&n) == 0 ? n : 0;
}

int Nvml::index_by_pci_bus_id(const std::string& bus_id) const {
  nvmlDevice_t d = nullptr;
  unsigned index = 0;
  if (!impl_->ok || impl_->by_pci(bus_id.c_str(), &d) != 0 || impl_->index_of(d, &index) != 0) return -1;
  return static_cast<int>(index);
}

GpuSample Nvml::sample(unsigned index) const {
  GpuSample s;
  nvmlDevice_t d = impl_->device(index);
  if (d == nullptr) return s;
  NvmlUtilization u{};
  NvmlMemory m{};
  if (impl_->utilization(d, &u) == 0) {
    s.utilization_gpu = u.gpu;
    s.utilization_memory = u.memory;
    s.valid = true;
  }
  if (impl_->memory(d, &m) == 0) {
    s.memory_used = m.used;
    s.memory_total = m.total;
  }
  impl_->clock(d, kNvmlClockSm, &s.sm_clock_mhz);
  impl_->power(d, &s.power_mw);
  return s;
}

std::vector<GpuProcess> Nvml::compute_processes(unsigned index) const {
  std::vector<GpuProcess> out;
  nvmlDevice_t d = impl_->device(index);
  if (d == nullptr || impl_->processes == nullptr) return out;
  unsigned count = 64;
  std::vector<NvmlProcessInfo> infos(count);
  if (impl_->processes(d, &count, infos.data()) != 0) return out;
  for (unsigned i = 0; i < count && i < infos.size(); ++i) {
    const bool known = infos[i].usedGpuMemory != ~0ull;  // NVML_VALUE_NOT_AVAILABLE
    out.push_back(GpuProcess{infos[i].pid, known ? infos[i].usedGpuMemory : 0});
  }
  return out;
}

}  // namespace liftoff
