// The .kiln tokenizer section: u32 length of a JSON header {"kind", "vocab_size", and the chat
// template and special tokens when there are}, the header, then the tokenizer's own bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/tokenizer_blob.h"

namespace kiln {

std::vector<uint8_t> encode_tokenizer_section(const TokenizerBlob& blob);
Result<TokenizerBlob> decode_tokenizer_section(std::span<const uint8_t> bytes, const std::string& where);

}  // namespace kiln
