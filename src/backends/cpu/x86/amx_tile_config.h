// The one tile configuration every AMX path loads (kernels and probes alike): 64 bytes as
// LDTILECFG reads them (Intel SDM vol. 1, 3.2: palette, start row, 14 reserved bytes, the
// bytes per row of tiles 0-15 as u16, their rows as u8). Every tile 16 rows of 64 bytes.
//
// It is a constant in read-only data, never built on the stack: g++ 12 does not see that
// _tile_loadconfig reads its operand and dropped the stores of a stack copy's rows and widths
// as dead (palette = 1 alone reached LDTILECFG, every tile unconfigured, and the first tile
// instruction raised SIGILL). A constant has no stores to drop. No ISA code here: the tests
// read it on any CPU.
#pragma once

#include <cstdint>

namespace kiln::cpu {

struct alignas(64) AmxTileConfig {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(AmxTileConfig) == 64);

// Tiles 0-7: w4a16 uses 0 (C, f32 16 x 16), 1 (B, 16 pairs x 16 rows), 2 and 3 (A hi and lo);
// the others 0-3 (C of four token blocks), 4 and 5 (B, and the low part of f16 weights), 6 and
// 7 (A hi and lo).
inline constexpr int kAmxTilesUsed = 8;
inline constexpr AmxTileConfig kAmxTileConfig = {
    1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

}  // namespace kiln::cpu
