// Element indexing of a dense 4-D [N, C, H, W] tensor in either layout (contiguous NCHW or channels-last
// NHWC), for kernels that walk their output in memory order and keep the input's layout.
#pragma once
#include <cstdint>

#include "runtime/macros.h"

namespace liftoff {

struct Nchw {
  int64_t n, c, h, w;
};

// The coordinates of linear element i of a tensor of sizes s stored in the given layout.
LIFTOFF_HD Nchw unravel_nchw(int64_t i, const Nchw& s, bool channels_last) {
  Nchw p;
  if (channels_last) {
    p.c = i % s.c;
    i /= s.c;
    p.w = i % s.w;
    i /= s.w;
    p.h = i % s.h;
    p.n = i / s.h;
  } else {
    p.w = i % s.w;
    i /= s.w;
    p.h = i % s.h;
    i /= s.h;
    p.c = i % s.c;
    p.n = i / s.c;
  }
  return p;
}

// The linear element index of (n, c, h, w) in a tensor of sizes s.
LIFTOFF_HD int64_t ravel_nchw(const Nchw& p, const Nchw& s, bool channels_last) {
  return channels_last ? ((p.n * s.h + p.h) * s.w + p.w) * s.c + p.c
                       : ((p.n * s.c + p.c) * s.h + p.h) * s.w + p.w;
}

}  // namespace liftoff
