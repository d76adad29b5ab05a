// Transitional: models/nn/zoo.cpp's two switches (LIFTOFF_FUSED_BN_RELU, LIFTOFF_CHANNELS_LAST) still read
// their value through env_number until they become model options; then this file goes. Everything else reads
// runtime/config.h, whose table declares these two knobs too.
#pragma once
#include <optional>

namespace liftoff {

// The runtime/config knob called `name` as a number (a boolean knob gives 0 or 1): its override, environment
// value or default; nullopt when it has none. `minimum`, `minimum_exclusive` and `what` are the old call
// sites' and are ignored: the table decides what is accepted and words the error. A name that is not in the
// table is a ValueError.
std::optional<double> env_number(const char* name, double minimum, bool minimum_exclusive, const char* what);

}  // namespace liftoff
