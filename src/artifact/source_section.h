// The .kiln source record: the model the file was compiled from (its path, its content identity)
// and the request it was compiled with, so that a file this kiln cannot run (a CPU target this
// machine lacks, an older format version) can be rebuilt from its source when that source is
// present and unchanged (engine/open_model.cpp), or the message can name the command that does it.
//
// JSON, UTF-8:
//   {"path": "/abs/model.gguf",      the source as it was named, made absolute
//    "size": 123, "hash": "0123456789abcdef",   its identity (engine/compile_cache.h: the bytes'
//                                     size and an XXH3 of all of them or of samples), no mtime:
//                                     a copy of the same bytes is the same source
//    "scheme": "w4a16", "group": 32, "symmetric": true, "strict": false,
//    "quantize_classifier": false, "fuse": true, "max_tokens": 512,
//    "tokenizer": "",                 another tokenizer file it was compiled with ("" : its own)
//    "overrides": "",                 the overrides file's text ("" : none)
//    "calibrated": false}             true: --calib/--imatrix statistics shaped the weights, which
//                                     the source alone does not reproduce
// The path and identity depend only on the source's bytes and name, so the same inputs still
// give the same .kiln bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace kiln {

struct SourceRecord {
  std::string path;
  uint64_t size = 0;
  uint64_t hash = 0;
  std::string scheme;
  int group = 32;
  bool symmetric = true;
  bool strict = false;
  bool quantize_classifier = false;
  bool fuse = true;
  int max_tokens = 0;
  std::string tokenizer;
  std::string overrides;
  bool calibrated = false;
};

std::string encode_source_section(const SourceRecord& record);
Result<SourceRecord> decode_source_section(std::span<const uint8_t> bytes, const std::string& where);

}  // namespace kiln
