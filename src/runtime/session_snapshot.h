// A session's state in a file: its tokens and the KV cache rows they filled, bound to the model
// (its identity), the context and the cache's element type; checksummed, written atomically.
//
// Layout (little-endian): "KILNSESS" | u32 version (1) | u32 kv dtype | u64 model identity |
// u32 n_ctx | u32 n_tokens | u32 n_layers | u32 kv_dim | i32 tokens[n_tokens] |
// keys then values, [layer][n_tokens][kv_dim] | u64 XXH3 of everything before.
#pragma once

#include <string>
#include <vector>

#include "runtime/session.h"

namespace kiln {

Status save_session_snapshot(const Session& session, std::span<const int> tokens, const std::string& path);
// Restores into `session` and returns the tokens; on any error the session is unchanged.
Result<std::vector<int>> load_session_snapshot(Session& session, const std::string& path);
// The same on bytes in memory; `where` names them in messages (fuzzing, tests).
Result<std::vector<int>> load_session_snapshot_bytes(Session& session, std::span<const uint8_t> bytes,
                                                     const std::string& where);
// The file's bytes, as save_session_snapshot writes them.
Result<std::vector<uint8_t>> encode_session_snapshot(const Session& session, std::span<const int> tokens);

}  // namespace kiln
