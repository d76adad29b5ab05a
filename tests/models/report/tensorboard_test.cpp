// --tensorboard: CRC-32C against published vectors, Event bytes against a hand encoding of the protobuf
// spec, and files read back by a reader written here from the TFRecord and protobuf specs (bitwise CRC,
// a generic wire-format walker). tests/tools/read_tfevents.py reads a train run's files with Google's
// protobuf runtime as well.
#include "models/report/tensorboard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace liftoff {
namespace {

namespace fs = std::filesystem;

// --- an independent reader -------------------------------------------------------------------------------

uint32_t bitwise_crc32c(const std::string& s) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : s) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint64_t read_le(const std::string& s, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(s[pos + i])) << (8 * i);
  return v;
}

// Every record's data, after checking both CRCs and the framing.
std::vector<std::string> read_records(const std::string& bytes) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    EXPECT_GE(bytes.size() - pos, 16u);
    const uint64_t length = read_le(bytes, pos, 8);
    EXPECT_EQ(read_le(bytes, pos + 8, 4), masked(bitwise_crc32c(bytes.substr(pos, 8))));
    const std::string data = bytes.substr(pos + 12, length);
    EXPECT_EQ(read_le(bytes, pos + 12 + length, 4), masked(bitwise_crc32c(data)));
    out.push_back(data);
    pos += 16 + length;
  }
  EXPECT_EQ(pos, bytes.size());
  return out;
}

struct Field {
  int number = 0;
  int wire = 0;
  uint64_t scalar = 0;  // varint, fixed32 and fixed64 bits
  std::string bytes;    // length-delimited
};

std::vector<Field> parse_message(const std::string& m) {
  std::vector<Field> fields;
  size_t pos = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; pos < m.size(); shift += 7) {
      const auto b = static_cast<unsigned char>(m[pos++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (pos < m.size()) {
    const uint64_t key = varint();
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    if (f.wire == 0) {
      f.scalar = varint();
    } else if (f.wire == 1 || f.wire == 5) {
      const int n = f.wire == 1 ? 8 : 4;
      f.scalar = read_le(m, pos, n);
      pos += static_cast<size_t>(n);
    } else if (f.wire == 2) {
      const uint64_t n = varint();
      f.bytes = m.substr(pos, n);
      pos += n;
    } else {
      ADD_FAILURE() << "wire type " << f.wire;
      break;
    }
    fields.push_back(f);
  }
  return fields;
}

struct ReadEvent {
  double wall_time = 0.0;
  int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> scalars;
};

ReadEvent decode_event(const std::string& data) {
  ReadEvent e;
  for (const Field& f : parse_message(data)) {
    if (f.number == 1 && f.wire == 1) std::memcpy(&e.wall_time, &f.scalar, 8);
    if (f.number == 2 && f.wire == 0) e.step = static_cast<int64_t>(f.scalar);
    if (f.number == 3 && f.wire == 2) e.file_version = f.bytes;
    if (f.number != 5 || f.wire != 2) continue;
    for (const Field& value : parse_message(f.bytes)) {  // Summary.value
      std::string tag;
      float v = 0.0f;
      for (const Field& vf : parse_message(value.bytes)) {
        if (vf.number == 1) tag = vf.bytes;
        if (vf.number == 2 && vf.wire == 5) {
          const auto bits = static_cast<uint32_t>(vf.scalar);
          std::memcpy(&v, &bits, 4);
        }
      }
      e.scalars[tag] = v;
    }
  }
  return e;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_dir(const std::string& name) {
  return ::testing::TempDir() + "liftoff_tb_test_" + std::to_string(::getpid()) + "_" + name;
}

// --- tests -----------------------------------------------------------------------------------------------

TEST(TfEvents, Crc32cMatchesPublishedVectors) {
  EXPECT_EQ(tfevents::crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(tfevents::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(tfevents::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(tfevents::crc32c("", 0), 0u);
  EXPECT_EQ(tfevents::masked_crc32c("123456789", 9), masked(0xE3069283u));
}

TEST(TfEvents, ScalarEventIsTheProtobufEncoding) {
  // Event{wall_time: 1.5, step: 300, summary{value{tag: "x", simple_value: 0.5}}}, by hand from the spec.
  const std::string expected(
      "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f"  // 1: fixed64 1.5
      "\x10\xac\x02"                          // 2: varint 300
      "\x2a\x0a"                              // 5: Summary, 10 bytes
      "\x0a\x08"                              //   1: Value, 8 bytes
      "\x0a\x01x"                             //     1: tag "x"
      "\x15\x00\x00\x00\x3f",                 //     2: fixed32 0.5f
      24);
  EXPECT_EQ(tfevents::scalar_event(1.5, 300, "x", 0.5f), expected);
  const std::string version(
      "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x1a\x0d"
      "brain.Event:2",
      24);
  EXPECT_EQ(tfevents::file_version_event(1.5), version);
}

TEST(TfEvents, RecordsFrameTheData) {
  const std::string data = tfevents::scalar_event(1.7e9, 7, "train/loss", 2.25f);
  const std::vector<std::string> records = read_records(tfevents::frame_record(data));
  ASSERT_EQ(records.size(), 1u);
  const ReadEvent e = decode_event(records[0]);
  EXPECT_DOUBLE_EQ(e.wall_time, 1.7e9);
  EXPECT_EQ(e.step, 7);
  EXPECT_FLOAT_EQ(e.scalars.at("train/loss"), 2.25f);
}

TEST(SummaryWriter, WritesAnEventFileTensorBoardFinds) {
  const std::string dir = temp_dir("runs") + "/nested/run1";
  std::string path;
  {
    SummaryWriter w(dir);
    path = w.path();
    w.add_scalar("train/loss", 1.5, 10);
    w.add_scalar("train/loss", 1.25, 20);
    w.flush();
  }
  EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir));
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;
  const std::vector<std::string> records = read_records(read_file(path));
  ASSERT_EQ(records.size(), 3u);
  const ReadEvent first = decode_event(records[0]);
  EXPECT_EQ(first.file_version, "brain.Event:2");
  EXPECT_GT(first.wall_time, 1.5e9);  // seconds since 1970
  const ReadEvent second = decode_event(records[2]);
  EXPECT_EQ(second.step, 20);
  EXPECT_FLOAT_EQ(second.scalars.at("train/loss"), 1.25f);
  EXPECT_GE(second.wall_time, first.wall_time);
  SummaryWriter again(dir);  // a second writer in the same directory gets its own file
  EXPECT_NE(again.path(), path);
  fs::remove_all(temp_dir("runs"));
}

TEST(SummaryWriter, RecordsBecomeTaggedScalarsOfWhatWasMeasured) {
  const std::string dir = temp_dir("records");
  std::string path;
  {
    SummaryWriter w(dir);
    path = w.path();
    MetricsRecord r;
    r.step = 50;
    r.loss = 0.5;
    r.lr = 0.1;
    r.images_per_second = 1000.0;
    r.step_ms = 32.0;
    r.host_rss = int64_t{3} << 20;
    add_scalars(w, r);  // no GPU figures: none written
    EvalRecord e;
    e.step = 50;
    e.test_loss = 0.25;
    e.accuracy = 0.875;
    add_scalars(w, e);
  }
  std::map<std::string, std::pair<int64_t, float>> seen;
  for (const std::string& rec : read_records(read_file(path))) {
    const ReadEvent e = decode_event(rec);
    for (const auto& [tag, value] : e.scalars) seen[tag] = {e.step, value};
  }
  const std::map<std::string, float> expected = {{"train/loss", 0.5f},
                                                 {"train/lr", 0.1f},
                                                 {"train/images_per_s", 1000.0f},
                                                 {"train/step_ms", 32.0f},
                                                 {"memory/host_rss_mib", 3.0f},
                                                 {"test/loss", 0.25f},
                                                 {"test/accuracy", 0.875f}};
  ASSERT_EQ(seen.size(), expected.size());
  for (const auto& [tag, value] : expected) {
    ASSERT_EQ(seen.count(tag), 1u) << tag;
    EXPECT_EQ(seen[tag].first, 50) << tag;
    EXPECT_FLOAT_EQ(seen[tag].second, value) << tag;
  }
  fs::remove_all(dir);
}

TEST(SummaryWriter, AFileInTheWayIsAnErrorNamingIt) {
  const std::string file = temp_dir("a_file");
  std::ofstream(file) << "x";
  try {
    SummaryWriter w(file);
    FAIL() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
  fs::remove(file);
}

}  // namespace
}  // namespace liftoff
