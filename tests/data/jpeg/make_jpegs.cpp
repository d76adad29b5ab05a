// Writes the JPEG variants of tests/data/jpeg/ with libjpeg (the encoder most JPEGs in the wild come from):
// chroma subsampling 4:2:0, 4:2:2, 4:4:0 and 4:4:4, grayscale, CMYK, optimised Huffman tables, restart
// markers, progressive, one scan per component, and an arithmetic-coded file (valid, but not decodable by
// stb_image). Not part of the build; regenerate with (Debian: libjpeg62-turbo-dev)
//   g++ -std=c++17 -O1 tests/data/jpeg/make_jpegs.cpp -ljpeg -o /tmp/make_jpegs && /tmp/make_jpegs
//   tests/data/jpeg
// The pixels are tests/data/image_io_test.cpp's pattern(): 16 + 2x + 2y + 40c on a 31x23 image.
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <jpeglib.h>  // needs size_t and FILE declared first

namespace {

constexpr int kWidth = 31, kHeight = 23;

struct Variant {
  const char* name;
  int components;  // 1 gray, 3 RGB (stored as YCbCr), 4 CMYK
  int h0, v0;      // sampling factors of the first component (the others are 1x1)
  bool progressive, optimize, arithmetic, scan_per_component;
  int restart_mcus;
};

bool write(const std::string& path, const Variant& v) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = kWidth;
  cinfo.image_height = kHeight;
  cinfo.input_components = v.components;
  cinfo.in_color_space = v.components == 1 ? JCS_GRAYSCALE : v.components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 95, TRUE);
  cinfo.comp_info[0].h_samp_factor = v.h0;
  cinfo.comp_info[0].v_samp_factor = v.v0;
  for (int c = 1; c < v.components; ++c)
    cinfo.comp_info[c].h_samp_factor = cinfo.comp_info[c].v_samp_factor = 1;
  cinfo.optimize_coding = v.optimize ? TRUE : FALSE;
  cinfo.arith_code = v.arithmetic ? TRUE : FALSE;
  cinfo.restart_interval = static_cast<unsigned>(v.restart_mcus);
  std::vector<jpeg_scan_info> scans(static_cast<size_t>(v.components));
  if (v.progressive) jpeg_simple_progression(&cinfo);
  if (v.scan_per_component) {
    for (int c = 0; c < v.components; ++c) {
      scans[static_cast<size_t>(c)] = jpeg_scan_info{1, {c, 0, 0, 0}, 0, 63, 0, 0};
    }
    cinfo.scan_info = scans.data();
    cinfo.num_scans = v.components;
  }
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<JSAMPLE> row(static_cast<size_t>(kWidth * v.components));
  while (cinfo.next_scanline < cinfo.image_height) {
    const int y = static_cast<int>(cinfo.next_scanline);
    for (int x = 0; x < kWidth; ++x) {
      for (int c = 0; c < v.components; ++c) {
        row[static_cast<size_t>(x * v.components + c)] = static_cast<JSAMPLE>(16 + 2 * x + 2 * y + 40 * c);
      }
    }
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&cinfo, rows, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return std::fclose(f) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_jpegs <output directory>\n");
    return 2;
  }
  const Variant variants[] = {
      // name                      comps h0 v0 progressive optimize arithmetic scan_per_comp restart
      {"baseline-420.jpg", 3, 2, 2, false, false, false, false, 0},
      {"baseline-422.jpg", 3, 2, 1, false, false, false, false, 0},
      {"baseline-440.jpg", 3, 1, 2, false, false, false, false, 0},
      {"baseline-444.jpg", 3, 1, 1, false, false, false, false, 0},
      {"gray.jpg", 1, 1, 1, false, false, false, false, 0},
      {"cmyk.jpg", 4, 1, 1, false, false, false, false, 0},
      {"optimized-420.jpg", 3, 2, 2, false, true, false, false, 0},
      {"restart-420.jpg", 3, 2, 2, false, false, false, false, 1},
      {"restart-gray.jpg", 1, 1, 1, false, true, false, false, 3},
      {"scan-per-component-420.jpg", 3, 2, 2, false, true, false, true, 0},
      {"progressive-420.jpg", 3, 2, 2, true, true, false, false, 0},
      {"progressive-444.jpg", 3, 1, 1, true, true, false, false, 0},
      {"progressive-gray.jpg", 1, 1, 1, true, true, false, false, 0},
      {"progressive-restart-420.jpg", 3, 2, 2, true, true, false, false, 2},
      {"arithmetic-420.jpg", 3, 2, 2, false, false, true, false, 0},
  };
  for (const Variant& v : variants) {
    const std::string path = std::string(argv[1]) + "/" + v.name;
    if (!write(path, v)) {
      std::fprintf(stderr, "make_jpegs: cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("%s\n", path.c_str());
  }
  return 0;
}
