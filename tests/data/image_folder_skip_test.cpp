// ImageFolder's bad-file accounting (issue 27): the load-time check finds a truncated PNG and a PNG whose
// header claims 100000x100000 pixels, with their reasons, in file order; the error policy stops at the first;
// a file that goes bad after the check is recorded when load() meets it; each file counts once.
#include <gtest/gtest.h>
#include <stb/stb_image_write.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/image_folder.h"

namespace liftoff {
namespace {

namespace fs = std::filesystem;

class ImageFolderSkipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("liftoff_skip_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    for (const char* cls : {"a", "b"}) {
      fs::create_directories(root_ / cls);
      for (int i = 0; i < 4; ++i) write_png((root_ / cls / (std::to_string(i) + ".png")).string(), i);
    }
    // Truncated: the first 60 bytes of a good file (its IDAT chunk claims more than follows).
    const std::string good = read((root_ / "a" / "0.png").string());
    write((root_ / "a" / "trunc.png").string(), good.substr(0, 60));
    // A PNG header claiming 100000 x 100000 pixels.
    std::string huge("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\x01\x86\xa0\0\x01\x86\xa0\x08\x02\0\0\0\0\0\0\0", 33);
    huge += std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12);
    write((root_ / "b" / "huge.png").string(), huge);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write_png(const std::string& path, int seed) {
    std::vector<uint8_t> pixels(8 * 8 * 3);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7 + seed * 31);
    ASSERT_NE(stbi_write_png(path.c_str(), 8, 8, 3, pixels.data(), 8 * 3), 0);
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  ImageFolderOptions options(BadSamplePolicy policy) const {
    ImageFolderOptions o;
    o.on_bad_sample = policy;
    o.height = o.width = 8;
    o.channels = 3;
    return o;
  }

  fs::path root_;
};

TEST_F(ImageFolderSkipTest, LoadTimeCheckFindsBothWithReasonsInFileOrder) {
  const ImageFolder folder(root_.string(), options(BadSamplePolicy::skip));
  ASSERT_EQ(folder.size(), 10);
  EXPECT_EQ(folder.check_files(3), 2);
  const std::vector<SkippedFile> skipped = folder.skipped();
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].path, (root_ / "a" / "trunc.png").string());
  EXPECT_NE(skipped[0].reason.find("truncated"), std::string::npos) << skipped[0].reason;
  EXPECT_EQ(skipped[0].reason.find("image '"), std::string::npos)
      << "the path is not repeated: " << skipped[0].reason;
  EXPECT_EQ(skipped[1].path, (root_ / "b" / "huge.png").string());
  EXPECT_NE(skipped[1].reason.find("100000x100000"), std::string::npos) << skipped[1].reason;
  // Those two are never read again; the others load.
  std::vector<uint8_t> pixels(3 * 8 * 8);
  int loaded = 0;
  for (int64_t i = 0; i < folder.size(); ++i) loaded += folder.load(i, pixels.data()) ? 1 : 0;
  EXPECT_EQ(loaded, 8);
  EXPECT_EQ(folder.skipped_count(), 2);
  EXPECT_EQ(folder.skipped(1).size(), 1u);
  EXPECT_TRUE(folder.skipped(5).empty());
}

TEST_F(ImageFolderSkipTest, ErrorPolicyStopsAtTheFirstBadFile) {
  const ImageFolder folder(root_.string(), options(BadSamplePolicy::error));
  try {
    folder.check_files(2);
    FAIL() << "expected IOError";
  } catch (const IOError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("trunc.png") != std::string::npos || what.find("huge.png") != std::string::npos)
        << what;
  }
}

TEST_F(ImageFolderSkipTest, AFileThatGoesBadLaterIsRecordedWhenMetOnce) {
  const ImageFolder folder(root_.string(), options(BadSamplePolicy::skip));
  ASSERT_EQ(folder.check_files(1), 2);
  const std::string changed = (root_ / "b" / "2.png").string();
  write(changed, "not an image any more");
  int64_t index = -1;
  for (int64_t i = 0; i < folder.size(); ++i) {
    if (folder.path(i) == changed) index = i;
  }
  ASSERT_GE(index, 0);
  std::vector<uint8_t> pixels(3 * 8 * 8);
  EXPECT_FALSE(folder.load(index, pixels.data()));
  EXPECT_FALSE(folder.load(index, pixels.data()));
  folder.record_bad(index, "again");  // another reader: still once
  const std::vector<SkippedFile> later = folder.skipped(2);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].path, changed);
  EXPECT_FALSE(later[0].reason.empty());
  EXPECT_EQ(folder.skipped_count(), 3);
  EXPECT_TRUE(folder.is_bad(index));
}

}  // namespace
}  // namespace liftoff
