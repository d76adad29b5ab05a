// Multi-tensor apply, shared by the fused optimizer kernels (ops/optimizer_step) and the AMP unscale/inf
// check (ops/amp). Each launch carries up to kMaxTensors tensors' pointers and sizes, and a block -> (tensor,
// chunk) table, in a struct passed by value as a kernel parameter (<= 4 KB). No host-to-device copy, no sync;
// a long tensor list takes several launches, a big tensor spans several launches' chunks.
#pragma once
#include <vector>

#include "runtime/error.h"
#include "runtime/tensor.h"

namespace liftoff::cuda::mta {

constexpr int64_t kChunk = 32768;  // elements per block (ResNet-18's 11M parameters: ~2.5 blocks per SM)
constexpr int kMaxBlocks = 320;
constexpr int kBlock = 512;  // threads per block

// Tensors per launch for `Depth` parallel lists, so that the meta stays well under 4 KB with the kernel's
// args.
template <int Depth>
struct MaxTensors;
template <>
struct MaxTensors<1> {
  static constexpr int value = 110;
};
template <>
struct MaxTensors<2> {
  static constexpr int value = 72;
};
template <>
struct MaxTensors<3> {
  static constexpr int value = 48;
};
template <>
struct MaxTensors<4> {
  static constexpr int value = 36;
};
template <>
struct MaxTensors<5> {
  static constexpr int value = 28;
};

// Lists 0..Depth-1 (for the optimizers: params, grads, then the state tensors).
template <int Depth>
struct TensorListMeta {
  static constexpr int kMaxTensors = MaxTensors<Depth>::value;
  static_assert(kMaxTensors <= 255, "block_tensor holds tensor slots in an unsigned char");
  void* ptrs[Depth][kMaxTensors];
  int64_t sizes[kMaxTensors];
  unsigned char block_tensor[kMaxBlocks];
  int block_chunk[kMaxBlocks];
};

// Packs lists[d][t] (d < Depth; a missing list gives null pointers) into as few launches as the meta allows
// and calls launch(meta, blocks) for each. Sizes come from lists[0]; empty tensors are left out.
template <int Depth, class Launch>
void apply(const std::vector<const std::vector<Tensor>*>& lists, Launch&& launch) {
  constexpr int kMaxTensors = TensorListMeta<Depth>::kMaxTensors;
  TensorListMeta<Depth> meta{};
  int tensors = 0;
  int blocks = 0;
  const std::vector<Tensor>& first = *lists[0];
  for (size_t t = 0; t < first.size(); ++t) {
    const int64_t n = first[t].numel();
    if (n == 0) continue;
    for (int d = 0; d < Depth; ++d) {
      meta.ptrs[d][tensors] = lists[d] != nullptr ? (*lists[d])[t].raw_data() : nullptr;
    }
    meta.sizes[tensors] = n;
    ++tensors;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    LIFTOFF_CHECK(chunks <= 0x7fffffff, ShapeError, "multi-tensor apply: tensor of ", n,
                  " elements is too large");
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      meta.block_tensor[blocks] = static_cast<unsigned char>(tensors - 1);
      meta.block_chunk[blocks] = static_cast<int>(chunk);
      ++blocks;
      const bool last_chunk = chunk == chunks - 1;
      if (blocks == kMaxBlocks || (tensors == kMaxTensors && last_chunk)) {
        launch(meta, blocks);
        blocks = 0;
        if (last_chunk) {
          tensors = 0;
        } else {  // the current tensor continues in the next launch, in slot 0
          for (int d = 0; d < Depth; ++d) meta.ptrs[d][0] = meta.ptrs[d][tensors - 1];
          meta.sizes[0] = meta.sizes[tensors - 1];
          tensors = 1;
        }
      }
    }
  }
  if (blocks > 0) launch(meta, blocks);
}

#ifdef __CUDACC__
// Walks a block's chunk [start, end) with kIlp elements per thread and round: load(i) for all of them first
// (independent loads in flight; one element per thread and round left the optimizers at a third of the
// bandwidth), then update(i, loaded) in index order.
constexpr int kIlp = 4;
template <class Load, class Update>
__device__ __forceinline__ void walk_chunk(int64_t start, int64_t end, const Load& load,
                                           const Update& update) {
  for (int64_t base = start + threadIdx.x; base < end; base += kIlp * static_cast<int64_t>(blockDim.x)) {
    decltype(load(base)) loaded[kIlp];
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const int64_t i = base + u * static_cast<int64_t>(blockDim.x);
      if (i < end) loaded[u] = load(i);
    }
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const int64_t i = base + u * static_cast<int64_t>(blockDim.x);
      if (i < end) update(i, loaded[u]);
    }
  }
}
#endif

}  // namespace liftoff::cuda::mta
