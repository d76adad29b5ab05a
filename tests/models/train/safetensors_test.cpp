// safetensors files: round trips, the layout Python writes and reads, and every malformed file the reader
// must reject with an error naming the file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/train/safetensors.h"
#include "runtime/random.h"
#include "tests/models/train/checkpoint_files.h"

namespace liftoff {
namespace {
using namespace testing;  // NOLINT: the file helpers

// ---- safetensors: round trip and layout
// ---------------------------------------------------------------------

TEST(Safetensors, RoundTripEveryDtypeAndShape) {
  CheckpointDir dir;
  Generator gen(3);
  NamedTensors tensors{
      {"f32", randn({2, 3}, gen)},
      {"f64", randn({4}, gen, 0, 1, DType::f64)},
      {"f16", randn({3, 1}, gen).to(DType::f16)},
      {"bf16", randn({5}, gen).to(DType::bf16)},
      {"i64", Tensor::from_vector<int64_t>({-1, 1LL << 40, 7}, {3})},
      {"i32", Tensor::from_vector<int32_t>({-5, 6}, {1, 2})},
      {"u8", Tensor::from_vector<uint8_t>({0, 255, 9}, {3})},
      {"scalar", Tensor::full({}, 2.5)},
      {"empty", Tensor::zeros({0, 3})},
      {"strided", randn({3, 4}, gen).permute({1, 0})},
  };
  const std::map<std::string, std::string> meta{{"note", "caf\xc3\xa9"}, {"k", ""}};
  const std::string path = dir.file("t.safetensors");
  write_safetensors(path, tensors, meta);
  const SafetensorsFile f = read_safetensors(path);
  expect_same(f.tensors, tensors);
  EXPECT_EQ(f.metadata, meta);
  EXPECT_FALSE(fs::exists(path + ".tmp-" + std::to_string(::getpid())));
  // The same bytes from memory.
  const std::string bytes = read_all(path);
  EXPECT_EQ(bytes, safetensors_bytes(tensors, meta));
  expect_same(parse_safetensors(bytes.data(), bytes.size(), "mem").tensors, tensors);
}

TEST(Safetensors, LayoutIsWhatPythonExpects) {
  const std::string bytes = safetensors_bytes({{"a", Tensor::from_vector<float>({1.0f, 2.0f}, {2})},
                                               {"b", Tensor::from_vector<uint8_t>({7}, {1, 1})}},
                                              {{"m", "v"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  ASSERT_EQ((8 + n) % 8, 0u);  // data 8-byte aligned, header padded with spaces
  ASSERT_EQ(bytes.size(), 8 + n + 9);
  std::string header = bytes.substr(8, n);
  header.erase(header.find_last_not_of(' ') + 1);
  EXPECT_EQ(header, R"({"__metadata__":{"m":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"U8","shape":[1,1],"data_offsets":[8,9]}})");
  float two[2];
  std::memcpy(two, bytes.data() + 8 + n, 8);
  EXPECT_EQ(two[0], 1.0f);
  EXPECT_EQ(two[1], 2.0f);
  EXPECT_EQ(static_cast<uint8_t>(bytes.back()), 7);
}

TEST(Safetensors, ReadsFilesOrderedLikePythonWrites) {
  // Python may order tensors differently from the header and pads nothing: offsets decide the order.
  const std::string data = std::string("\x01\x02", 2) + std::string("\0\0\x80\x3f", 4);
  const std::string file = raw_file(
      R"({"x":{"dtype":"F32","shape":[],"data_offsets":[2,6]},"y":{"shape":[2],"dtype":"U8","data_offsets":[0,2]}})",
      data);
  const SafetensorsFile f = parse_safetensors(file.data(), file.size(), "mem");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "y");
  EXPECT_EQ(f.tensors[1].first, "x");
  EXPECT_EQ(f.tensors[1].second.item(), 1.0);
  EXPECT_TRUE(f.metadata.empty());
}

TEST(Safetensors, WriterRejectsBadNames) {
  CheckpointDir dir;
  const Tensor t = Tensor::zeros({1});
  EXPECT_THROW(write_safetensors(dir.file("a"), {{"", t}}), ValueError);
  EXPECT_THROW(write_safetensors(dir.file("a"), {{"__metadata__", t}}), ValueError);
  EXPECT_THROW(write_safetensors(dir.file("a"), {{"x", t}, {"x", t}}), ValueError);
  EXPECT_THROW(write_safetensors(dir.file("a"), {{"bad\xff", t}}), ValueError);
  EXPECT_FALSE(fs::exists(dir.file("a")));
}

TEST(Safetensors, WriteIntoMissingDirectoryFailsCleanly) {
  CheckpointDir dir;
  const std::string path = dir.file("missing/x.safetensors");
  expect_error<IOError>(
      [&] {
        write_safetensors(path, {{"x", Tensor::zeros({1})}});
      },
      path, "cannot create the temporary file");
}

// ---- safetensors: bad files, one test per problem
// -----------------------------------------------------------

class BadSafetensors : public ::testing::Test {
 protected:
  // Writes `bytes` and expects read_safetensors to throw an IOError naming the file and `fragment`.
  void expect_rejected(const std::string& bytes, const std::string& fragment) {
    const std::string path = dir_.file("bad.safetensors");
    write_all(path, bytes);
    expect_error<IOError>([&] { read_safetensors(path); }, path, fragment);
    // The in-memory parser agrees.
    expect_error<IOError>([&] { parse_safetensors(bytes.data(), bytes.size(), "mem.safetensors"); },
                          "mem.safetensors", fragment);
  }
  // One F32 tensor "w" with the given entry fields.
  void expect_entry_rejected(const std::string& entry, const std::string& data, const std::string& fragment) {
    expect_rejected(raw_file(R"({"w":)" + entry + "}", data), fragment);
  }
  CheckpointDir dir_;
};

TEST_F(BadSafetensors, EmptyFile) {
  expect_rejected("", "too short: 0 bytes");
}
TEST_F(BadSafetensors, ShorterThanTheLengthField) {
  expect_rejected(std::string("\x10\0\0", 3), "too short: 3 bytes");
}
TEST_F(BadSafetensors, HeaderLengthPastEndOfFile) {
  expect_rejected(raw_file("{}", "", 4096), "header length 4096 runs past the end of the file");
}
TEST_F(BadSafetensors, HeaderLengthAboveCap) {
  expect_rejected(raw_file("{}", "", 1ULL << 62), "exceeds the limit of 100000000 bytes");
}
TEST_F(BadSafetensors, HeaderLengthAboveCustomCap) {
  const std::string bytes = raw_file(R"({"__metadata__":{"a":"b"}})", "");
  expect_error<IOError>([&] { parse_safetensors(bytes.data(), bytes.size(), "m", SafetensorsLimits{10}); },
                        "m", "exceeds the limit of 10 bytes");
}
TEST_F(BadSafetensors, HeaderNotAnObject) {
  expect_rejected(raw_file("[1,2]", ""), "does not start with '{'");
}
TEST_F(BadSafetensors, HeaderNotJson) {
  expect_rejected(raw_file(R"({"w": {"dtype": "F32",)", ""), "header is not valid JSON");
}
TEST_F(BadSafetensors, HeaderWithTrailingGarbage) {
  expect_rejected(raw_file("{} x", ""), "header is not valid JSON");
}
TEST_F(BadSafetensors, HeaderInvalidUtf8) {
  expect_rejected(raw_file("{\"\xff\xfe\":{}}", ""), "header is not valid JSON");
}
TEST_F(BadSafetensors, DuplicateTensorName) {
  const std::string e = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  expect_rejected(raw_file(R"({"w":)" + e + R"(,"w":)" + e + "}", "a"), "the name 'w' appears twice");
}
TEST_F(BadSafetensors, MetadataNotAnObject) {
  expect_rejected(raw_file(R"({"__metadata__":[1]})", ""), "__metadata__ must be an object");
}
TEST_F(BadSafetensors, MetadataValueNotAString) {
  expect_rejected(raw_file(R"({"__metadata__":{"epoch":3}})", ""), "key 'epoch' holds a number");
}
TEST_F(BadSafetensors, EntryNotAnObject) {
  expect_rejected(raw_file(R"({"w":5})", ""), "expected an object");
}
TEST_F(BadSafetensors, MissingField) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1]})", "a", "missing field 'data_offsets'");
}
TEST_F(BadSafetensors, UnexpectedField) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1})", "a",
                        "unexpected field 'x'");
}
TEST_F(BadSafetensors, UnknownDtype) {
  expect_entry_rejected(R"({"dtype":"I8","shape":[1],"data_offsets":[0,1]})", "a", "unsupported dtype 'I8'");
}
TEST_F(BadSafetensors, DtypeNotAString) {
  expect_entry_rejected(R"({"dtype":4,"shape":[1],"data_offsets":[0,1]})", "a", "dtype must be a string");
}
TEST_F(BadSafetensors, ShapeNotAnArray) {
  expect_entry_rejected(R"({"dtype":"U8","shape":1,"data_offsets":[0,1]})", "a", "shape must be an array");
}
TEST_F(BadSafetensors, NegativeDimension) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[-1],"data_offsets":[0,1]})", "a",
                        "shape [-1] has a dimension that is not an integer in [0, 2^63)");
}
TEST_F(BadSafetensors, FractionalDimension) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1.5],"data_offsets":[0,1]})", "a", "not an integer");
}
TEST_F(BadSafetensors, DimensionBeyondInt64) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,1]})", "a",
                        "not an integer in [0, 2^63)");
}
TEST_F(BadSafetensors, ShapeProductOverflows) {
  expect_entry_rejected(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})", "abcd",
                        "overflows 64-bit sizes");
}
TEST_F(BadSafetensors, ShapeBytesOverflowWithElementSize) {
  // 2^62 elements fit in int64, 2^62 * 4 bytes do not.
  expect_entry_rejected(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]})", "abcd",
                        "overflows 64-bit sizes");
}
TEST_F(BadSafetensors, TooManyDimensions) {
  std::string shape = "[1";
  for (int i = 0; i < 64; ++i) shape += ",1";
  expect_entry_rejected(R"({"dtype":"U8","shape":)" + shape + R"(],"data_offsets":[0,1]})", "a",
                        "shape has 65 dimensions");
}
TEST_F(BadSafetensors, ShapeDisagreesWithByteSize) {
  expect_entry_rejected(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,20]})", std::string(20, 'x'),
                        "shape [2, 3] of F32 needs 24 bytes, data_offsets [0, 20] hold 20");
}
TEST_F(BadSafetensors, OffsetsPastEnd) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[8],"data_offsets":[0,8]})", "abc",
                        "data_offsets [0, 8] run past the end of the data (3 bytes after the header)");
}
TEST_F(BadSafetensors, OffsetsReversed) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[0],"data_offsets":[3,1]})", "abc", "end before they begin");
}
TEST_F(BadSafetensors, OffsetsMalformed) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1],"data_offsets":[0]})", "a",
                        "data_offsets must be [begin, end]");
  expect_entry_rejected(R"({"dtype":"U8","shape":[1],"data_offsets":[-1,0]})", "a", "data_offsets must be");
}
TEST_F(BadSafetensors, OverlappingTensors) {
  expect_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                           R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                           "abc"),
                  "tensor 'b' (bytes 1..3) overlaps tensor 'a' (bytes 0..2)");
}
TEST_F(BadSafetensors, GapBetweenTensors) {
  expect_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                           R"("b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
                           "abc"),
                  "bytes 1..2 of the data belong to no tensor");
}
TEST_F(BadSafetensors, TrailingBytesAfterLastTensor) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})", "abc",
                        "2 bytes after the last tensor belong to no tensor");
}
TEST_F(BadSafetensors, NamesAreSanitisedInMessages) {
  const std::string path = dir_.file("bad.safetensors");
  write_all(path, raw_file("{\"a\\nb\":{\"dtype\":\"Q\",\"shape\":[],\"data_offsets\":[0,0]}}", ""));
  expect_error<IOError>([&] { read_safetensors(path); }, path, "tensor 'a\\x0Ab'");
}
TEST_F(BadSafetensors, MissingFileAndDirectory) {
  const std::string missing = dir_.file("nope.safetensors");
  expect_error<IOError>([&] { read_safetensors(missing); }, missing, "no such file");
  expect_error<IOError>([&] { read_safetensors(dir_.str()); }, dir_.str(), "is a directory");
}

}  // namespace
}  // namespace liftoff
