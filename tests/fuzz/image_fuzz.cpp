// libFuzzer harness for the image-decode wrapper (data/image_io.h, stb_image underneath): header probe,
// decode to gray and to RGB, then resizing the decoded image both ways.
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_io.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace liftoff;
  static const std::string path = fuzz::scratch_path("image");
  fuzz::write_bytes(path, data, size);
  // Smaller than the defaults so one input cannot take seconds; the checks are the same at any limit.
  ImageLimits limits;
  limits.max_side = 2048;
  limits.max_pixels = int64_t{1} << 20;
  try {
    const ImageInfo info = read_image_info(path, limits);
    if (info.width < 1 || info.height < 1 || info.width * info.height > limits.max_pixels)
      fuzz::invariant_failed("info outside the limits");
  } catch (const Error& e) {
    fuzz::check_error(e, path);
  }
  for (int64_t channels : {1, 3}) {
    try {
      const DecodedImage image = decode_image_file(path, channels, limits);
      if (image.channels != channels ||
          static_cast<int64_t>(image.pixels.size()) != image.width * image.height * channels) {
        fuzz::invariant_failed("decoded size disagrees with the dimensions");
      }
      std::vector<uint8_t> out(static_cast<size_t>(channels * 7 * 5));
      fit_image(image, 7, 5, ResizeMode::bilinear, out.data());
      fit_image(image, 7, 5, ResizeMode::center_crop, out.data());
    } catch (const Error& e) {
      fuzz::check_error(e, path);
    }
  }
  return 0;
}
