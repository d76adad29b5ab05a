// Deterministic mode (train --deterministic): where a backend offers several algorithms for one op (cuDNN's
// convolutions), only those that give the same bits on every run are used. Liftoff's own kernels are
// deterministic for a given thread count and device already (fixed-order reductions, no float atomics).
#pragma once

namespace liftoff {

void set_deterministic_algorithms(bool on);
bool deterministic_algorithms();

}  // namespace liftoff
