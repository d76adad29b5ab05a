#include "ops/layer_norm/backward_variant.h"

#include <atomic>

#include "runtime/error.h"

namespace liftoff {

namespace {
std::atomic<LayerNormBackward> g_variant{LayerNormBackward::automatic};

// What `automatic` runs: the fastest variant measured on the H200 (scripts/device_stage_lnorm.sh).
constexpr LayerNormBackward kDefaultVariant = LayerNormBackward::packed;

constexpr LayerNormBackward kVariants[] = {LayerNormBackward::automatic, LayerNormBackward::tile,
                                           LayerNormBackward::packed, LayerNormBackward::two_rows,
                                           LayerNormBackward::wide};
}  // namespace

void set_layer_norm_backward(LayerNormBackward variant) {
  g_variant.store(variant);
}

LayerNormBackward layer_norm_backward() {
  return g_variant.load();
}

LayerNormBackward resolved_layer_norm_backward() {
  const LayerNormBackward variant = layer_norm_backward();
  return variant == LayerNormBackward::automatic ? kDefaultVariant : variant;
}

const char* layer_norm_backward_name(LayerNormBackward variant) {
  switch (variant) {
    case LayerNormBackward::automatic:
      return "automatic";
    case LayerNormBackward::tile:
      return "tile";
    case LayerNormBackward::packed:
      return "packed";
    case LayerNormBackward::two_rows:
      return "two_rows";
    case LayerNormBackward::wide:
      return "wide";
  }
  return "?";
}

LayerNormBackward parse_layer_norm_backward(const std::string& name) {
  for (LayerNormBackward v : kVariants)
    if (name == layer_norm_backward_name(v)) return v;
  throw ValueError("layer norm backward variant '" + name +
                   "' is unknown; use automatic, tile, packed, two_rows or wide");
}

}  // namespace liftoff
