#include "models/report/tensorboard.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "runtime/error.h"
#include "runtime/platform/process.h"

namespace liftoff {

namespace tfevents {

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire format, the three kinds these messages use: varint (0), 64-bit (1), length-delimited (2),
// 32-bit (5). A key is (field number << 3) | wire type.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | type);
}

template <class T>
void put_little_endian(std::string& out, T bits) {
  for (size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// tensorflow.Event field numbers (tensorboard/compat/proto/event.proto, summary.proto).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = kCrc32cTable[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string file_version_event(double wall_time, const std::string& version) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  put_bytes(event, kEventFileVersion, version);
  return event;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string summary_value;
  put_bytes(summary_value, kValueTag, tag);
  put_float(summary_value, kValueSimpleValue, value);
  std::string summary;
  put_bytes(summary, kSummaryValue, summary_value);
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  if (step != 0) {  // proto3: a default value is not written
    put_key(event, kEventStep, kVarint);
    put_varint(event, static_cast<uint64_t>(step));
  }
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string frame_record(const std::string& data) {
  std::string record;
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  record += length;
  put_little_endian(record, masked_crc32c(length.data(), length.size()));
  record += data;
  put_little_endian(record, masked_crc32c(data.data(), data.size()));
  return record;
}

}  // namespace tfevents

namespace {

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string new_event_file_path(const std::string& log_dir) {
  static std::atomic<int> files_opened{0};
  const auto seconds = static_cast<long long>(wall_time_now());
  return (std::filesystem::path(log_dir) / str_cat("events.out.tfevents.", seconds, ".",
                                                   platform::host_name(), ".", platform::process_id(), ".",
                                                   files_opened++))
      .string();
}

}  // namespace

SummaryWriter::SummaryWriter(const std::string& log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec || !std::filesystem::is_directory(log_dir)) {
    throw IOError("cannot create the TensorBoard directory '" + log_dir + "'" +
                  (ec ? ": " + ec.message() : std::string(": a file of that name is in the way")) +
                  "; give --tensorboard a writable directory");
  }
  path_ = new_event_file_path(log_dir);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw IOError("cannot write the TensorBoard event file '" + path_ + "'");
  write_record(tfevents::file_version_event(wall_time_now()));
  flush();
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t global_step) {
  write_record(tfevents::scalar_event(wall_time_now(), global_step, tag, static_cast<float>(value)));
}

void SummaryWriter::write_record(const std::string& event) {
  const std::string record = tfevents::frame_record(event);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  if (!out_) throw IOError("writing the TensorBoard event file '" + path_ + "' failed");
}

void SummaryWriter::flush() {
  out_.flush();
  if (!out_) throw IOError("writing the TensorBoard event file '" + path_ + "' failed");
}

void add_scalars(SummaryWriter& writer, const MetricsRecord& r) {
  constexpr double kMiB = 1024.0 * 1024.0;
  if (r.loss) writer.add_scalar("train/loss", *r.loss, r.step);
  writer.add_scalar("train/lr", r.lr, r.step);
  if (r.images_per_second) writer.add_scalar("train/images_per_s", *r.images_per_second, r.step);
  if (r.step_ms) writer.add_scalar("train/step_ms", *r.step_ms, r.step);
  if (r.gpu_util_pct) writer.add_scalar("gpu/util_pct", *r.gpu_util_pct, r.step);
  if (r.device_memory) {
    writer.add_scalar("memory/device_allocated_mib", static_cast<double>(*r.device_memory) / kMiB, r.step);
  }
  if (r.host_rss) writer.add_scalar("memory/host_rss_mib", static_cast<double>(*r.host_rss) / kMiB, r.step);
  writer.flush();
}

void add_scalars(SummaryWriter& writer, const EvalRecord& r) {
  writer.add_scalar("test/loss", r.test_loss, r.step);
  writer.add_scalar("test/accuracy", r.accuracy, r.step);
  writer.flush();
}

}  // namespace liftoff
