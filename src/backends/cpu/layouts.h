// The weight layouts the fast CPU kernels read, packed by `kiln compile` from the reference
// layout of src/layout/weight_layout.h (never at load time).
//
// All of them are "row-interleaved": the rows (output channels) of a [rows][cols] matrix are
// cut into tiles of 16, the last one padded with zero rows, and each tile is stored as one
// contiguous run of bytes, so that one thread streams its tiles front to back and a SIMD
// register holds one value of each of the 16 rows (a "column" of the tile). The kernels then
// multiply a column by a broadcast activation, and never reduce horizontally. Per scheme, the
// bytes of one tile (K = cols, all values little-endian):
//
//   "r16"  f32    [K][16] f32 (column k: the 16 rows' element k)           64 K bytes
//          f16    [K][16] IEEE half                                         32 K bytes
//          bf16   [K][16] bfloat16                                          32 K bytes
//          w4a16, w4a8 (groups of g = 32, 64, 128; K a multiple of g), per group:
//                 [16] f16 scales, asymmetric only: [16] f16 mins,
//                 then g/8 chunks of 64 bytes, each 16 little-endian u32 (one per row) holding
//                 8 nibbles of 8 consecutive elements k0..k0+7 of the chunk: byte m (0..3) of
//                 the u32 of row r is  u[r][k0 + m] | u[r][k0 + 4 + m] << 4.
//                 The nibbles u are the reference ones (sym: w = (u - 8) d; asym: w = u d + m),
//                 so a group takes exactly the bytes of 16 GGML Q4_0/Q4_1 blocks.
//          w4a16 g256 asymmetric (GGML's Q4_K; K a multiple of 256), per super-block of 256,
//                 2304 bytes (16 x 144: the blocks' own bytes, moved):
//                 [16] f16 d, [16] f16 dmin, 12 planes of [16] bytes (plane p: byte p of each
//                 row's 12 packed 6-bit scales and mins), then 32 chunks of 64 bytes as above
//                 (the 8 sub-blocks of 32 elements, four chunks each).
//          w4a16 g256 symmetric (GGML's IQ4_XS; K a multiple of 256), per super-block of 256,
//                 2176 bytes (16 x 136): [16] f16 d, 6 planes of [16] bytes (plane p: byte 2 + p of
//                 each row's block: its packed sub-block scales), then 32 chunks of 64 bytes as
//                 above holding each element's level index.
//          w6a16 (GGML's Q6_K; K a multiple of 256), per super-block of 256, 3360 bytes
//                 (16 x 210): [16] f16 d, 16 planes of [16] int8 scales (plane i: sub-block i of
//                 16 elements), 32 chunks of 64 bytes holding the low 4 bits of the values as
//                 the 4-bit chunks above, then 16 words of 64 bytes: per sub-block i of 16
//                 elements k0 = 16 i.. and row, a u32 whose byte m holds the high 2 bits of
//                 elements k0 + m, k0 + 4 + m, k0 + 8 + m, k0 + 12 + m at bits 0, 2, 4, 6 (so
//                 that shifts and one mask put them beside each chunk's nibbles).
//          w5a16 (GGML's Q5_K; K a multiple of 256), per super-block of 256, 2816 bytes
//                 (16 x 176): Q4_K's 2304 bytes above (d, dmin, the 12 planes, the 32 chunks of
//                 the low 4 bits), then 8 words of 64 bytes: per sub-block j of 32 elements
//                 k0 = 32 j.. and row, a u32 whose byte m holds the fifth bits of elements
//                 k0 + m + 4 b at bit b (b = 0..7: chunk c's low nibbles at bit 2c, its high
//                 ones at 2c + 1, so that a shift and one mask put them at bit 4 of each value).
//          w5a16 g32 (GGML's Q5_0 symmetric, Q5_1 asymmetric; K a multiple of 32), per block
//                 of 32, 352 bytes (16 x 22) or 384 (16 x 24): [16] f16 d, Q5_1 only [16] f16 m,
//                 one word of 64 bytes holding the fifth bits as w5a16's above (byte m of row
//                 r's u32: the fifth bit of element 4 b + m at bit b), then the 4 chunks of 64
//                 bytes of the low 4 bits as the 4-bit chunks above.
//   "r16k4" w8a16, w8a8
//                 [16] f32 scales, [16] i32 row sums (sum of the row's q), then ceil(K/4)
//                 chunks of 64 bytes: 16 u32, the u32 of row r holding q[r][4c .. 4c + 3] (past
//                 K: zero). Integer dot products (VNNI, SDOT) read 4 elements per lane.
//                 With 8-bit groups (w8a16 g32/g64/g128), K / 32 blocks of 544 bytes instead:
//                 [16] f16 scales (the group's, repeated in each of its blocks of 32), then the
//                 block's 8 chunks of 64 bytes as above. For g32 a tile holds exactly the bytes
//                 of 16 x K/32 GGML Q8_0 blocks.
//
// Four consecutive elements per lane is what vpdpbusd/vpmaddubsw/sdot multiply at once: the
// 4-bit layout's low nibbles are elements k0..k0+3 and its high nibbles k0+4..k0+7.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "layout/weight_layout.h"

namespace kiln::cpu {

inline constexpr int kTileRows = 16;
inline constexpr std::string_view kLayoutR16 = "r16";
inline constexpr std::string_view kLayoutR16K4 = "r16k4";
// One block of 32 inputs of a w8a16 g tile: 16 f16 scales, then 8 chunks of 64 bytes.
inline constexpr int64_t kW8GroupBlockBytes = 32 + 8 * 64;
// One super-block of 256 inputs of a k-quant tile, and where its parts start.
inline constexpr int64_t kQ4KTileBlockBytes = 16 * 144, kQ4KPlanes = 64, kQ4KChunks = 256;
inline constexpr int64_t kQ5KTileBlockBytes = 16 * 176, kQ5KHighs = kQ4KTileBlockBytes;  // then as Q4_K's
inline constexpr int64_t kQ6KTileBlockBytes = 16 * 210, kQ6KScales = 32, kQ6KChunks = 288, kQ6KHighs = 2336;
inline constexpr int64_t kIq4XsTileBlockBytes = 16 * 136, kIq4XsPlanes = 32, kIq4XsChunks = 128;
// One block of 32 inputs of a w5a16 g32 tile (Q5_0, Q5_1): its bytes, and where its fifth bits start.
inline constexpr int64_t q5_32_tile_block_bytes(bool symmetric) { return symmetric ? 16 * 22 : 16 * 24; }
inline constexpr int64_t q5_32_highs(bool symmetric) { return symmetric ? 32 : 64; }

// The layout the matmul kernels read for a scheme.
std::string_view matmul_layout(Scheme s);

// Bytes of one 16-row tile / of the whole matrix in `layout`; nullopt when the layout does not
// exist for this scheme or the shape does not fit it.
std::optional<uint64_t> tile_bytes(const QuantParams& p, std::string_view layout, int64_t cols);
std::optional<uint64_t> packed_bytes(const QuantParams& p, std::string_view layout, int64_t rows, int64_t cols);

// Repacks a matrix from the reference layout (exactly quantized_size bytes) into `layout`.
Status pack_matrix(const QuantParams& p, std::string_view layout, std::span<const uint8_t> ref, int64_t rows,
                   int64_t cols, std::vector<uint8_t>& out);

// The inverse: the reference bytes of a packed matrix.
Status unpack_matrix(const QuantParams& p, std::string_view layout, std::span<const uint8_t> packed, int64_t rows,
                     int64_t cols, std::vector<uint8_t>& ref);

// Dequantizes row `r` of a packed matrix into out[cols] (the embedding reads rows this way).
void unpack_row(const QuantParams& p, std::string_view layout, const uint8_t* packed, int64_t cols, int64_t r,
                float* out);

}  // namespace kiln::cpu
