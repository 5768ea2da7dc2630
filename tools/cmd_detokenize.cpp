// kiln detokenize: token ids to text, as Hugging Face's decode does.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "tools/cli_common.h"
#include "engine/open_tokenizer.h"

namespace kiln::cli {

namespace {

struct DetokenizeCmd {
  std::string tokenizer, ids;
  bool skip_special = false;
  int vocab_size = 0;
};

// "1,2,3", "1 2 3" or "[1, 2, 3]".
Result<std::vector<int>> parse_ids(const std::string& s, int vocab) {
  std::vector<int> out;
  size_t i = 0;
  auto skip = [&]() {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',' || s[i] == '\t' || s[i] == '\n' || s[i] == '[' || s[i] == ']')) ++i;
  };
  for (skip(); i < s.size(); skip()) {
    size_t j = i;
    if (s[j] == '-') ++j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i || (j == i + 1 && s[i] == '-'))
      return invalid_argument("--ids: '" + s.substr(i, 12) + "' is not a token id");
    const std::string num = s.substr(i, j - i);
    if (num.size() > 10 || std::stoll(num) < 0 || std::stoll(num) >= vocab)
      return invalid_argument("--ids: " + num + " is outside the vocabulary of " + std::to_string(vocab));
    out.push_back(static_cast<int>(std::stoll(num)));
    i = j;
  }
  return out;
}

int detokenize(const DetokenizeCmd& c) {
  auto tok = open_tokenizer(c.tokenizer, c.vocab_size);
  if (!tok) return fail(tok.status());
  auto ids = parse_ids(c.ids, (*tok)->vocab_size());
  if (!ids) return fail(ids.status());
  DecodeOptions o;
  o.skip_special = c.skip_special;
  const std::string text = (*tok)->decode_text(*ids, o);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void add_detokenize_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<DetokenizeCmd>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Token ids to text (printed as is, no newline added)");
  cmd->add_option("tokenizer", c->tokenizer, "tokenizer.json, HF folder, .gguf, llama2.c tokenizer .bin or .kiln")
      ->required();
  cmd->add_option("--ids", c->ids, "ids: 1,2,3 or [1, 2, 3]")->required();
  cmd->add_flag("--skip-special", c->skip_special, "leave special tokens out (default: show them)");
  cmd->add_option("--vocab-size", c->vocab_size, "llama2.c .bin: its vocabulary size (default: count the records)")
      ->check(at_least(0));
  cmd->callback([c, &exit_code] { exit_code = detokenize(*c); });
}

}  // namespace kiln::cli
