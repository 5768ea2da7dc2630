// Hugging Face config.json parser on arbitrary text.
#include <cstdint>
#include <string_view>

#include "formats/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kiln::parse_hf_config(text, "", "fuzz/config.json");
  (void)kiln::parse_hf_config("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":8,"
                              "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"vocab_size\":4}",
                              text, "fuzz/config.json");
  return 0;
}
