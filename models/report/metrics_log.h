// --log metrics.jsonl: one JSON object per line, every --log-every steps (docs/report-schema.md).
#pragma once
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

namespace liftoff {

struct MetricsRecord {
  int64_t step = 0;  // optimizer steps done
  int64_t epoch = 0;
  std::optional<double> loss;  // running mean loss (reading it synchronises: log every N steps)
  double lr = 0.0;
  double images_per_second = 0.0;  // the run's throughput so far (the report's figure)
  double step_ms = 0.0;            // recent (smoothed)
  double elapsed_s = 0.0;
  std::optional<double> gpu_util_pct;    // latest NVML sample
  std::optional<int64_t> device_memory;  // caching allocator, bytes allocated now
};

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // truncates; throws IOError
  void write(const MetricsRecord& record);       // one line, flushed
 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace liftoff
