// Which CUDA kernel runs layer norm's fused backward on 16-bit data (bf16/f16 rows of 513..4096 values read
// as 16-byte packs; other rows, dtypes and group norm always take the tile kernel). A process-wide choice
// for measurement: op_bandwidth --layer-norm-variant and the GPU tests run every variant; training leaves it
// automatic.
//   tile      one row a group, the row converted to f32 registers (E = 8 values a thread up to 2048
//             columns, 16 up to 4096), the row after next prefetched into L2; 4 blocks an SM at E = 8;
//   packed    16 values a thread (two 16-byte loads of each of gy and x), the rows held as loaded (16-bit
//             pairs in 32-bit registers) and converted where used; 3 blocks an SM;
//   two_rows  the tile kernel's threads per row and E, two rows a group per round held as loaded, one
//             reduction of both rows' sums; 3 blocks an SM at E = 8, 2 at 16;
//   wide      32 values a thread held as loaded: a warp per 1024-value row (no block barriers), 128 threads
//             per 4096-value row; 2 blocks an SM.
// Bytes of gy and x in flight an SM at 1024 columns: tile 32 KB, packed and two_rows 48 KB, wide 64 KB.
#pragma once
#include <string>

namespace liftoff {

enum class LayerNormBackward { automatic, tile, packed, two_rows, wide };

void set_layer_norm_backward(LayerNormBackward variant);  // process-wide, until set back to automatic
LayerNormBackward layer_norm_backward();
// The variant that runs: the override, or the measured default for `automatic`.
LayerNormBackward resolved_layer_norm_backward();

const char* layer_norm_backward_name(LayerNormBackward variant);
// "automatic", "tile", "packed", "two_rows" or "wide"; throws ValueError naming the choices otherwise.
LayerNormBackward parse_layer_norm_backward(const std::string& name);

}  // namespace liftoff
