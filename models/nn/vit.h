// A Vision Transformer (Dosovitskiy et al. 2021) written as a researcher writes it in PyTorch, from
// nn.Conv2d, nn.TransformerEncoderLayer, nn.LayerNorm and nn.Linear:
//   conv_proj   = Conv2d(in, dim, patch, stride=patch)              # patch embedding
//   class_token = Parameter(zeros(1, 1, dim))
//   pos_embedding = Parameter(randn(1, (image_size/patch)^2 + 1, dim) * 0.02)
//   encoder     = Sequential(*[TransformerEncoderLayer(dim, heads, mlp_dim, dropout=0, activation="gelu",
//                                                      batch_first=True, norm_first=True)] * depth)
//   norm        = LayerNorm(dim);  head = Linear(dim, classes)
//   forward: x = conv_proj(x).flatten(2).transpose(1, 2); x = cat([class_token.expand(N, -1, -1), x], 1)
//            x = encoder(x + pos_embedding); return head(norm(x)[:, 0])
// (torchvision's VisionTransformer has the same structure; its LayerNorm eps is 1e-6 and its parameter names
// differ.) Other layers keep their PyTorch default initialisation.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "models/nn/layers.h"

namespace liftoff {

class VisionTransformer : public Module {
 public:
  // image_size must be a multiple of patch; dim a multiple of heads.
  VisionTransformer(int64_t in_channels, int64_t classes, int64_t image_size, int64_t patch, int64_t dim,
                    int64_t depth, int64_t heads, int64_t mlp_dim, Generator& gen);
  // x [N, in, image_size, image_size] -> [N, classes].
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "VisionTransformer"; }

 private:
  int64_t image_size_, dim_;
  Tensor class_token_, pos_embedding_;
  std::shared_ptr<Conv2d> conv_proj_;
  std::shared_ptr<Sequential> encoder_;
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Linear> head_;
};

}  // namespace liftoff
