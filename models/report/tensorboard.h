// --tensorboard DIR: scalars as TensorBoard event files, the form torch.utils.tensorboard.SummaryWriter
// writes. A file is a sequence of records (uint64 length, masked CRC32C of the length, the data, masked
// CRC32C of the data), each holding one serialized tensorflow.Event: the first says file_version
// "brain.Event:2", every other one carries wall_time, step and summary { value { tag, simple_value } }. The
// few protobuf fields are encoded here by hand and CRC32C is a short table: no protobuf or crc32c build
// dependency (docs/report- schema.md says why).
#pragma once
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "models/report/metrics_log.h"

namespace liftoff {

namespace tfevents {
// CRC-32C (Castagnoli, reflected 0x82F63B78): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
// The masked form TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);
// A serialized Event with only file_version set (the first record of every file).
std::string file_version_event(double wall_time, const std::string& version = "brain.Event:2");
// A serialized Event holding one scalar summary value.
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
// One TFRecord: length, its masked CRC, the data, the data's masked CRC.
std::string frame_record(const std::string& data);
}  // namespace tfevents

class SummaryWriter {
 public:
  // Creates `log_dir` (and its parents) and a new file in it, events.out.tfevents.<seconds>.<host>.<pid>.
  // <n>, starting with the file_version record. Throws IOError naming the directory or file.
  explicit SummaryWriter(const std::string& log_dir);
  // PyTorch's add_scalar: one Event with `tag` at `global_step`, stamped with the wall time now.
  void add_scalar(const std::string& tag, double value, int64_t global_step);
  // Hands what was written to the file system (TensorBoard reads files while they grow).
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  std::string path_;
  std::ofstream out_;
};

// The scalars of a training window (train/loss, train/lr, train/images_per_s, train/step_ms, gpu/util_pct,
// memory/device_allocated_mib, memory/host_rss_mib: those measured) and of an evaluation (test/loss,
// test/accuracy), at the record's optimizer step; then flushes.
void add_scalars(SummaryWriter& writer, const MetricsRecord& record);
void add_scalars(SummaryWriter& writer, const EvalRecord& record);

}  // namespace liftoff
