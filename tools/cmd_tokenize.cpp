// kiln tokenize: text to token ids, as Hugging Face's encode does (ids as a JSON array).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tools/cli_common.h"
#include "engine/open_tokenizer.h"

namespace kiln::cli {

namespace {

struct TokenizeCmd {
  std::string tokenizer, text, jsonl;
  bool text_given = false;
  bool add_special = false, plain = false;
  int vocab_size = 0;
};

std::string ids_json(const std::vector<int>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

int tokenize(const TokenizeCmd& c) {
  if (c.text_given == !c.jsonl.empty())
    return usage_error("kiln tokenize needs exactly one of --text and --jsonl");
  auto tok = open_tokenizer(c.tokenizer, c.vocab_size);
  if (!tok) return fail(tok.status());
  EncodeOptions o;
  o.add_special = c.add_special;
  o.plain = c.plain;
  if (c.text_given) {
    auto ids = (*tok)->encode(c.text, o);
    if (!ids) return fail(ids.status().with_context("--text"));
    std::printf("%s\n", ids_json(*ids).c_str());
    return 0;
  }
  std::ifstream file;
  if (c.jsonl != "-") {
    file.open(c.jsonl, std::ios::binary);
    if (!file) return fail(not_found(c.jsonl + ": cannot open"));
  }
  std::istream& in = c.jsonl == "-" ? std::cin : file;
  std::string line, out;
  for (size_t n = 1; std::getline(in, line); ++n) {
    const std::string where = c.jsonl + ": line " + std::to_string(n);
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
      return fail(invalid_argument(where + ": not a JSON object with a string \"text\""));
    auto ids = (*tok)->encode(j["text"].get_ref<const std::string&>(), o);
    if (!ids) return fail(ids.status().with_context(where));
    out = "{\"ids\": " + ids_json(*ids) + "}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<TokenizeCmd>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Text to token ids (a JSON array), as Hugging Face's encode");
  cmd->add_option("tokenizer", c->tokenizer, "tokenizer.json, HF folder, .gguf, llama2.c tokenizer .bin or .kiln")
      ->required();
  cmd->add_option("--text", c->text, "the text to encode")->each([c](const std::string&) { c->text_given = true; });
  cmd->add_option("--jsonl", c->jsonl, "a file of lines {\"text\": ...} ('-' for stdin); writes {\"ids\": [...]} lines");
  cmd->add_flag("--add-special", c->add_special, "add BOS/EOS as the tokenizer's post-processor does");
  cmd->add_flag("--plain", c->plain, "special-token strings in the text are ordinary text");
  cmd->add_option("--vocab-size", c->vocab_size, "llama2.c .bin: its vocabulary size (default: count the records)")
      ->check(at_least(0));
  cmd->callback([c, &exit_code] { exit_code = tokenize(*c); });
}

}  // namespace kiln::cli
