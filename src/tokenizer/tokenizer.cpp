#include "tokenizer/tokenizer.h"

#include "tokenizer/utf8_stream.h"

namespace kiln {

SpecialMatch special_match(const EncodeOptions& options, size_t begin, size_t end) {
  if (options.plain) return SpecialMatch::kTextConsumed;
  for (const auto& [b, e] : options.plain_ranges) {
    if (e <= begin) continue;
    if (b >= end) break;  // sorted: no later range reaches the match
    return b <= begin && end <= e ? SpecialMatch::kTextConsumed : SpecialMatch::kTextNextByte;
  }
  return SpecialMatch::kToken;
}

Result<std::vector<int>> Tokenizer::encode(std::string_view text, bool add_bos) const {
  KILN_ASSIGN_OR_RETURN(std::vector<int> ids, encode(text, EncodeOptions{}));
  if (add_bos && bos_id() >= 0) ids.insert(ids.begin(), bos_id());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  int prev = -1;
  for (int id : ids) {
    out += decode_piece(prev, id);
    prev = id;
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int>& ids, const DecodeOptions& options) const {
  if (options.skip_special) return decode(ids);
  std::string out;
  int prev = -1;
  for (int id : ids) {
    out += is_special(id) ? piece(id) : decode_piece(prev, id);
    prev = id;
  }
  return out;
}

std::string Tokenizer::decode_text(const std::vector<int>& ids, const DecodeOptions& options) const {
  Utf8Stream stream;
  std::string out = stream.push(decode(ids, options));
  stream.finish(out);
  return out;
}

}  // namespace kiln
