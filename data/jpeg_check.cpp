#include "data/jpeg_check.h"

#include <array>
#include <cstdio>
#include <cstring>

#include "runtime/error.h"

namespace liftoff {

namespace {

constexpr int kSof0 = 0xC0, kSof1 = 0xC1, kSof2 = 0xC2, kDht = 0xC4, kSoi = 0xD8, kEoi = 0xD9, kSos = 0xDA,
              kDqt = 0xDB, kDnl = 0xDC, kDri = 0xDD, kCom = 0xFE;

bool is_restart(int m) {
  return m >= 0xD0 && m <= 0xD7;
}

// "DHT (0xFFC4)", "SOF9 (0xFFC9)", "APP1 (0xFFE1)", or just "0xFF01".
std::string marker_text(int m) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0xFF%02X", m);
  const auto named = [&](const std::string& name) { return str_cat(name, " (", hex, ")"); };
  if (m >= 0xC0 && m <= 0xCF && m != kDht && m != 0xC8 && m != 0xCC) return named(str_cat("SOF", m - 0xC0));
  if (m >= 0xE0 && m <= 0xEF) return named(str_cat("APP", m - 0xE0));
  if (is_restart(m)) return named(str_cat("RST", m - 0xD0));
  switch (m) {
    case kDht:
      return named("DHT");
    case 0xCC:
      return named("DAC");
    case kSoi:
      return named("SOI");
    case kEoi:
      return named("EOI");
    case kSos:
      return named("SOS");
    case kDqt:
      return named("DQT");
    case kDnl:
      return named("DNL");
    case kDri:
      return named("DRI");
    case 0xDE:
      return named("DHP");
    case kCom:
      return named("COM");
  }
  return hex;
}

class JpegWalker {
 public:
  JpegWalker(const std::string& path, const uint8_t* data, size_t size) : path_(path), d_(data), n_(size) {}

  JpegFrameInfo run() {
    // stb_image takes a run of 0xFF bytes followed by 0xD8 as a JPEG; anything else is not one to it.
    size_t at = 0;
    while (at < n_ && d_[at] == 0xFF) ++at;
    if (at == 0 || at >= n_ || d_[at] != kSoi) return info_;
    info_.is_jpeg = true;
    pos_ = at + 1;
    // Tables, then the frame header. Like stb_image, allow stray bytes between segments, not right after SOI.
    for (bool first = true;; first = false) {
      const int m = read_marker(/*skip_stray_bytes=*/!first);
      if (m == kSof0 || m == kSof1 || m == kSof2) {
        frame(m);
        break;
      }
      table_or_skip(m, "before the frame header");
    }
    // Scans and tables up to EOI; here stb_image wants each segment followed directly by a marker.
    for (;;) {
      const int m = read_marker(false);
      if (m == kEoi) break;
      if (m == kSos) {
        scan();
      } else if (m == kDnl) {
        fixed_length_segment(m, 4);
      } else {
        table_or_skip(m, "after the frame header");
      }
    }
    // stb_image would hand out uninitialised memory for a component no scan filled.
    for (int i = 0; i < nf_; ++i) {
      if (!comps_[i].scanned) fail("frame component ", i + 1, " (id ", comps_[i].id, ") is coded in no scan");
    }
    // Whatever follows EOI is ignored, as stb_image does.
    info_.scans = scans_;
    return info_;
  }

 private:
  struct Component {
    int id = 0, h = 0, v = 0, tq = 0;
    bool scanned = false;
    bool dc_started = false;  // progressive: its first DC scan was seen
  };

  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw IOError(str_cat("image '", path_, "': JPEG ", parts..., "; the file is corrupt or truncated"));
  }

  [[noreturn]] void fail_truncated(const std::string& where) const {
    fail("data ends at byte ", n_, " ", where, " without an end-of-image marker");
  }

  // stb_image's marker reader: a marker is 0xFF (any number of them) and a code byte.
  int read_marker(bool skip_stray_bytes) {
    if (skip_stray_bytes) {
      while (pos_ < n_ && d_[pos_] != 0xFF) ++pos_;
    }
    if (pos_ >= n_) fail_truncated("between segments");
    if (d_[pos_] != 0xFF) fail("expected a marker at byte ", pos_, ", found a data byte");
    marker_at_ = pos_;
    while (pos_ < n_ && d_[pos_] == 0xFF) ++pos_;
    if (pos_ >= n_) fail_truncated("inside a marker");
    return d_[pos_++];
  }

  // The segment after the marker just read: [begin_, end_) is its payload (after the 2-byte length).
  void segment(int m) {
    if (n_ - pos_ < 2) fail_truncated("inside the length of " + marker_text(m));
    const size_t length = size_t{d_[pos_]} << 8 | d_[pos_ + 1];
    if (length < 2)
      fail("segment ", marker_text(m), " at byte ", marker_at_, " has length ", length, " (< 2)");
    if (length > n_ - pos_) {
      fail("segment ", marker_text(m), " at byte ", marker_at_, " claims ", length, " bytes but only ",
           n_ - pos_, " follow");
    }
    begin_ = pos_ + 2;
    end_ = pos_ + length;
    pos_ = end_;
  }

  void fixed_length_segment(int m, size_t length) {
    segment(m);
    if (end_ - begin_ + 2 != length) {
      fail("segment ", marker_text(m), " at byte ", marker_at_, " has length ", end_ - begin_ + 2,
           ", expected ", length);
    }
  }

  void table_or_skip(int m, const char* where) {
    if (m == kDqt) return quant_tables();
    if (m == kDht) return huffman_tables();
    if (m == kDri) return fixed_length_segment(m, 4);
    if (m == 0xEE) return adobe_segment();
    if ((m >= 0xE0 && m <= 0xEF) || m == kCom) return segment(m);
    // Lossless, hierarchical and arithmetic-coded JPEGs are valid files stb_image cannot decode.
    if ((m >= 0xC3 && m <= 0xCF && m != kDht && m != 0xC8) || m == 0xDE) {
      throw IOError(
          str_cat("image '", path_, "': JPEG marker ", marker_text(m),
                  " means lossless, hierarchical or arithmetic coding, which stb_image does not decode; "
                  "re-save the image as a baseline or progressive JPEG, or as PNG"));
    }
    fail("unexpected marker ", marker_text(m), " at byte ", marker_at_, " ", where);
  }

  // APP14 "Adobe": its transform flag says whether 3 components are YCbCr or RGB, 4 are YCCK or CMYK.
  void adobe_segment() {
    segment(0xEE);
    if (end_ - begin_ >= 12 && std::memcmp(d_ + begin_, "Adobe", 5) == 0)
      info_.adobe_transform = d_[begin_ + 11];
  }

  void quant_tables() {
    segment(kDqt);
    for (size_t p = begin_; p < end_;) {
      const int precision = d_[p] >> 4, id = d_[p] & 15;
      if (precision > 1 || id > 3) {
        fail("quantization table at byte ", p, " has precision ", precision, " and id ", id,
             " (expected 0 or 1, and 0 to 3)");
      }
      const size_t length = 1 + 64 * size_t(precision + 1);
      if (end_ - p < length) fail("DQT segment at byte ", marker_at_, " ends inside its table ", id);
      quant_defined_[id] = true;
      p += length;
    }
  }

  void huffman_tables() {
    segment(kDht);
    for (size_t p = begin_; p < end_;) {
      if (end_ - p < 17) fail("DHT segment at byte ", marker_at_, " ends inside a table header");
      const int table_class = d_[p] >> 4, id = d_[p] & 15;
      if (table_class > 1 || id > 3) {
        fail("Huffman table at byte ", p, " has class ", table_class, " and id ", id,
             " (expected 0 or 1, and 0 to 3)");
      }
      size_t codes = 0;
      for (int i = 1; i <= 16; ++i) codes += d_[p + i];
      // stb_image sizes its tables for 256 codes and writes past them otherwise.
      if (codes > 256) {
        fail("Huffman table at byte ", p, " (", table_class == 0 ? "DC" : "AC", " ", id, ") lists ", codes,
             " codes, at most 256 are allowed");
      }
      if (end_ - p < 17 + codes) fail("DHT segment at byte ", marker_at_, " ends inside its table");
      huffman_defined_[table_class][id] = true;
      p += 17 + codes;
    }
  }

  void frame(int m) {
    segment(m);
    progressive_ = m == kSof2;
    const size_t payload = end_ - begin_;
    nf_ = payload >= 6 ? d_[begin_ + 5] : 0;
    if (nf_ < 1 || nf_ > 4 || payload != 6 + 3 * size_t(nf_)) {
      fail("frame header at byte ", marker_at_, " declares ", nf_, " components in ", payload + 2,
           " bytes (expected 1 to 4 components and 8 + 3 per component bytes)");
    }
    info_.sof = m;
    info_.progressive = progressive_;
    info_.height = d_[begin_ + 1] << 8 | d_[begin_ + 2];
    info_.width = d_[begin_ + 3] << 8 | d_[begin_ + 4];
    info_.components = nf_;
    for (int i = 0; i < nf_; ++i) {
      const uint8_t* c = d_ + begin_ + 6 + 3 * i;
      Component& comp = comps_[i];
      comp.id = c[0];
      comp.h = c[1] >> 4;
      comp.v = c[1] & 15;
      comp.tq = c[2];
      if (comp.h < 1 || comp.h > 4 || comp.v < 1 || comp.v > 4 || comp.tq > 3) {
        fail("frame component ", i + 1, " has sampling factors ", comp.h, "x", comp.v,
             " and quantization table ", comp.tq, " (expected 1 to 4, and 0 to 3)");
      }
      info_.h[i] = comp.h;
      info_.v[i] = comp.v;
      for (int j = 0; j < i; ++j) {
        if (comps_[j].id == comp.id)
          fail("frame components ", j + 1, " and ", i + 1, " share the id ", comp.id);
      }
    }
  }

  void scan() {
    segment(kSos);
    ++scans_;
    const size_t sos_at = marker_at_;
    const size_t payload = end_ - begin_;
    const int ns = payload >= 1 ? d_[begin_] : 0;
    if (ns < 1 || ns > nf_ || payload != 4 + 2 * size_t(ns)) {
      fail("scan ", scans_, " (SOS at byte ", sos_at, ") has ", ns, " components in ", payload + 2,
           " bytes (expected 1 to ", nf_, " components and 6 + 2 per component bytes)");
    }
    const uint8_t* tail = d_ + begin_ + 1 + 2 * ns;
    const int ss = tail[0], se = tail[1], ah = tail[2] >> 4, al = tail[2] & 15;
    if (!progressive_ && (ss != 0 || ah != 0 || al != 0)) {
      fail("sequential scan ", scans_, " (SOS at byte ", sos_at, ") has Ss=", ss, ", Ah=", ah, ", Al=", al,
           " (all must be 0)");
    }
    // The progression rules of ITU T.81 G.1.1.1.1, as libjpeg enforces them.
    if (progressive_ && (ss > se || se > 63 || (ss == 0 && se != 0) || (ss > 0 && ns != 1) || ah > 13 ||
                         al > 13 || (ah != 0 && al != ah - 1))) {
      fail("progressive scan ", scans_, " (SOS at byte ", sos_at, ") has spectral selection ", ss, "..", se,
           ", successive approximation Ah=", ah, " Al=", al, " over ", ns, " components: not a valid step");
    }
    // Which tables the decoder reads: DC ones in sequential and first DC scans, AC ones in sequential and AC.
    const bool uses_dc = !progressive_ || (ss == 0 && ah == 0);
    const bool uses_ac = !progressive_ || ss > 0;
    int blocks = 0;
    std::array<bool, 4> seen{};
    for (int k = 0; k < ns; ++k) {
      const int id = d_[begin_ + 1 + 2 * k], dc = d_[begin_ + 2 + 2 * k] >> 4,
                ac = d_[begin_ + 2 + 2 * k] & 15;
      int i = 0;
      while (i < nf_ && comps_[i].id != id) ++i;
      if (i == nf_)
        fail("scan ", scans_, " (SOS at byte ", sos_at, ") names component id ", id, ", not in the frame");
      if (seen[i]) fail("scan ", scans_, " (SOS at byte ", sos_at, ") names component id ", id, " twice");
      seen[i] = true;
      Component& comp = comps_[i];
      blocks += comp.h * comp.v;
      if (dc > 3 || ac > 3) {
        fail("scan ", scans_, " (SOS at byte ", sos_at, ") gives component id ", id, " Huffman tables DC ",
             dc, " and AC ", ac, " (expected 0 to 3)");
      }
      // The fuzzer's crash: stb_image decodes with whatever an undefined table's memory holds.
      if (uses_dc && !huffman_defined_[0][dc]) undefined_table(sos_at, "DC Huffman", dc, id);
      if (uses_ac && !huffman_defined_[1][ac]) undefined_table(sos_at, "AC Huffman", ac, id);
      if (!quant_defined_[comp.tq]) undefined_table(sos_at, "quantization", comp.tq, id);
      // A progressive component starts with a DC scan; the DC scan is also what clears its coefficients in
      // stb_image, so anything else first would leave them uninitialised.
      if (progressive_ && !comp.dc_started && !(ss == 0 && ah == 0)) {
        fail("progressive scan ", scans_, " (SOS at byte ", sos_at, ") refines component id ", id,
             " before its first DC scan");
      }
      if (progressive_ && ss == 0 && ah == 0) comp.dc_started = true;
      comp.scanned = true;
    }
    if (ns > 1 && blocks > 10) {
      fail("scan ", scans_, " (SOS at byte ", sos_at, ") interleaves ", blocks,
           " blocks per MCU (at most 10)");
    }
    skip_entropy_coded_data();
  }

  [[noreturn]] void undefined_table(size_t sos_at, const char* kind, int table, int id) const {
    fail("scan ", scans_, " (SOS at byte ", sos_at, ") uses ", kind, " table ", table, " for component id ",
         id, ", which no segment before it defines");
  }

  // Ends at the first marker other than RST0-7 (0xFF 0x00 is a stuffed data byte); stb_image's decoder stops
  // there too, or earlier and then fails on the bytes it finds.
  void skip_entropy_coded_data() {
    while (pos_ < n_) {
      const void* ff = std::memchr(d_ + pos_, 0xFF, n_ - pos_);
      if (ff == nullptr) break;
      pos_ = static_cast<size_t>(static_cast<const uint8_t*>(ff) - d_);
      size_t next = pos_ + 1;
      while (next < n_ && d_[next] == 0xFF) ++next;
      if (next >= n_) break;
      if (d_[next] != 0 && !is_restart(d_[next])) return;  // pos_ is at the marker
      pos_ = next + 1;
    }
    fail_truncated(str_cat("inside scan ", scans_));
  }

  const std::string& path_;
  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0, marker_at_ = 0, begin_ = 0, end_ = 0;
  bool progressive_ = false;
  int nf_ = 0, scans_ = 0;
  std::array<Component, 4> comps_{};
  std::array<bool, 4> quant_defined_{};
  std::array<std::array<bool, 4>, 2> huffman_defined_{};  // [0] DC, [1] AC
  JpegFrameInfo info_;
};

}  // namespace

JpegFrameInfo check_jpeg_structure(const std::string& path, const uint8_t* data, size_t size) {
  return JpegWalker(path, data, size).run();
}

}  // namespace liftoff
