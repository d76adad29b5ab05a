#include "models/report/metrics_log.h"

#include "models/report/json.h"
#include "runtime/error.h"

namespace liftoff {

namespace {

template <class Io, class M>
void describe_record(Io& io, M& r) {
  io("step", r.step);
  io("epoch", r.epoch);
  io("loss", r.loss);
  io("lr", r.lr);
  io("images_per_s", r.images_per_second);
  io("step_ms", r.step_ms);
  io("elapsed_s", r.elapsed_s);
  io("gpu_util_pct", r.gpu_util_pct);
  io("device_memory", r.device_memory);
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_) throw IOError("cannot write the metrics log '" + path + "'");
}

void MetricsLog::write(const MetricsRecord& r) {
  report_json::json j;
  report_json::JsonWriter w(j);
  describe_record(w, r);
  write_line(j.dump());
}

void MetricsLog::write(const SkippedFileRecord& r) {
  report_json::json j;
  report_json::JsonWriter w(j);
  w("event", std::string("skipped_file"));
  w("path", r.path);
  w("reason", r.reason);
  w("found", r.found);
  write_line(j.dump());
}

void MetricsLog::write_line(const std::string& line) {
  out_ << line << "\n";
  out_.flush();
  if (!out_) throw IOError("writing the metrics log '" + path_ + "' failed");
}

}  // namespace liftoff
