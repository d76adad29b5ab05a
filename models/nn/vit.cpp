#include "models/nn/vit.h"

#include "ops/ops.h"
#include "runtime/error.h"

namespace liftoff {

VisionTransformer::VisionTransformer(int64_t in_channels, int64_t classes, int64_t image_size, int64_t patch,
                                     int64_t dim, int64_t depth, int64_t heads, int64_t mlp_dim,
                                     Generator& gen)
    : image_size_(image_size), dim_(dim) {
  LIFTOFF_CHECK(patch >= 1 && image_size >= patch && image_size % patch == 0, ValueError,
                "VisionTransformer: image_size (", image_size,
                ") must be a positive multiple of the patch size (", patch, ")");
  LIFTOFF_CHECK(depth >= 1, ValueError, "VisionTransformer: depth must be >= 1, got ", depth);
  const int64_t tokens = (image_size / patch) * (image_size / patch) + 1;
  class_token_ = register_parameter("class_token", Tensor::zeros({1, 1, dim}));
  pos_embedding_ = register_parameter("pos_embedding", randn({1, tokens, dim}, gen, 0.0, 0.02));
  conv_proj_ =
      register_module("conv_proj", std::make_shared<Conv2d>(in_channels, dim, patch, patch, 0, true, gen));
  encoder_ = register_module("encoder", std::make_shared<Sequential>());
  for (int64_t i = 0; i < depth; ++i)
    encoder_->push_back(
        std::make_shared<TransformerEncoderLayer>(dim, heads, gen, mlp_dim, 0.0, "gelu", 1e-5, true));
  norm_ = register_module("norm", std::make_shared<LayerNorm>(dim));
  head_ = register_module("head", std::make_shared<Linear>(dim, classes, true, gen));
}

Tensor VisionTransformer::forward(const Tensor& x) {
  LIFTOFF_CHECK(x.dim() == 4 && x.size(2) == image_size_ && x.size(3) == image_size_, ShapeError,
                "VisionTransformer: input must be [N, C, ", image_size_, ", ", image_size_,
                "] (the image_size it was built for: the positional embedding has one entry per patch), got ",
                shape_str(x.shape()));
  const int64_t n = x.size(0);
  Tensor y = transpose(flatten(conv_proj_->forward(x), 2, 3), 1, 2);  // [N, patches, dim]
  y = cat({expand(class_token_, {n, 1, dim_}), y}, 1);                // [N, tokens, dim]
  y = encoder_->forward(y + pos_embedding_);                          // broadcast over N
  return head_->forward(select(norm_->forward(y), 1, 0));
}

}  // namespace liftoff
