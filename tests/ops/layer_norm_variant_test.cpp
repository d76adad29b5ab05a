// The layer norm backward variant setting: names round-trip, unknown names are refused with the choices,
// and `automatic` resolves to a concrete variant (the measured default) while an override wins.
#include <gtest/gtest.h>

#include <string>

#include "ops/layer_norm/backward_variant.h"
#include "runtime/error.h"

namespace liftoff {
namespace {

TEST(LayerNormVariant, NamesRoundTrip) {
  for (LayerNormBackward v :
       {LayerNormBackward::automatic, LayerNormBackward::tile, LayerNormBackward::packed,
        LayerNormBackward::two_rows, LayerNormBackward::wide})
    EXPECT_EQ(parse_layer_norm_backward(layer_norm_backward_name(v)), v) << layer_norm_backward_name(v);
}

TEST(LayerNormVariant, UnknownNameListsTheChoices) {
  try {
    parse_layer_norm_backward("fast");
    FAIL() << "no error";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'fast'"), std::string::npos) << message;
    EXPECT_NE(message.find("two_rows"), std::string::npos) << message;
  }
}

TEST(LayerNormVariant, OverrideWinsAndAutomaticResolves) {
  EXPECT_EQ(layer_norm_backward(), LayerNormBackward::automatic);
  EXPECT_NE(resolved_layer_norm_backward(), LayerNormBackward::automatic);
  set_layer_norm_backward(LayerNormBackward::wide);
  EXPECT_EQ(layer_norm_backward(), LayerNormBackward::wide);
  EXPECT_EQ(resolved_layer_norm_backward(), LayerNormBackward::wide);
  set_layer_norm_backward(LayerNormBackward::automatic);
  EXPECT_NE(resolved_layer_norm_backward(), LayerNormBackward::automatic);
}

}  // namespace
}  // namespace liftoff
