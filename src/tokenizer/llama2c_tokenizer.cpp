// llama2.c tokenizer .bin: int32 max_token_length, then per id: float32 score, int32 len, len bytes.
#include <climits>

#include "core/byte_reader.h"
#include "core/mapped_file.h"
#include "tokenizer/spm_bpe.h"

namespace kiln {

Result<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer_bytes(std::span<const uint8_t> bytes,
                                                                const std::string& name, int vocab_size) {
  // run.c hard-codes <unk> = 0, BOS = 1, EOS = 2.
  if (vocab_size < 3)
    return invalid_argument(name + ": vocab_size " + std::to_string(vocab_size) +
                            " is too small for a llama2.c tokenizer (it needs <unk>, BOS and EOS)");
  ByteReader r(bytes, name);
  KILN_ASSIGN_OR_RETURN(int32_t max_len, r.read<int32_t>("max_token_length"));
  if (max_len < 0) return r.error_at(0, "max_token_length is negative (" + std::to_string(max_len) + ")");

  SpmBpeSpec spec;
  spec.name = name;
  // The vectors grow as tokens are read (8 bytes each at least), so a vocab_size larger than the
  // file fails at the truncation, not at an allocation.
  for (int id = 0; id < vocab_size; ++id) {
    const std::string tok = "token " + std::to_string(id);
    KILN_ASSIGN_OR_RETURN(float score, r.read<float>(tok + " score"));
    const size_t len_at = r.offset();
    KILN_ASSIGN_OR_RETURN(int32_t len, r.read<int32_t>(tok + " length"));
    if (len < 0) return r.error_at(len_at, tok + " has a negative length (" + std::to_string(len) + ")");
    if (len > max_len)
      return r.error_at(len_at, tok + " is " + std::to_string(len) + " bytes, longer than max_token_length " +
                                    std::to_string(max_len));
    KILN_ASSIGN_OR_RETURN(auto text, r.read_bytes(static_cast<uint64_t>(len), tok + " text"));
    spec.pieces.emplace_back(reinterpret_cast<const char*>(text.data()), text.size());
    spec.scores.push_back(score);
    // run.c's decode turns every piece spelled "<0xXX>" into its byte.
    spec.kinds.push_back(parse_byte_piece(spec.pieces.back()) >= 0 ? PieceKind::kByte : PieceKind::kNormal);
  }
  if (r.remaining() != 0)
    return r.error(std::to_string(r.remaining()) + " bytes follow the last of " + std::to_string(vocab_size) +
                   " tokens; does the model's vocab_size match this tokenizer?");

  spec.kinds[0] = PieceKind::kUnknown;
  spec.kinds[1] = PieceKind::kControl;
  spec.kinds[2] = PieceKind::kControl;
  spec.merge_rule = MergeRule::kScore;
  spec.initial = InitialSymbols::kLlama2c;
  spec.min_score = -1e10f;  // run.c's starting best_score: a pair must beat it
  spec.text_ops.push_back({TextOp::Kind::kPrepend, " ", "", false});  // the dummy prefix
  spec.byte_fallback = true;
  spec.byte_ids.resize(256);
  for (int b = 0; b < 256; ++b) spec.byte_ids[static_cast<size_t>(b)] = b + 3 < vocab_size ? b + 3 : 0;
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.special_prefix = {1};  // run.c's encode(text, bos=1, eos=0)
  spec.space_piece = " ";
  spec.strip_leading_space = true;
  KILN_ASSIGN_OR_RETURN(auto t, SpmBpeTokenizer::create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

Result<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer(const std::string& path, int vocab_size) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return load_llama2c_tokenizer_bytes(file->bytes(), path, vocab_size);
}

}  // namespace kiln
