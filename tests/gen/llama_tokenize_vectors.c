/* The oracle for GGUF tokenizers: llama.cpp's own llama_tokenize over test strings.
 * Reads JSON-free input: each text on stdin as a 4-byte little-endian length and the bytes;
 * writes one line of space-separated ids per text, for add_special=0 then add_special=1
 * (parse_special=1 both times), "ERR" when tokenize fails.
 * Build (tests/gen/make_gguf_tokenizer_vectors.py does it):
 *   cc -O1 llama_tokenize_vectors.c -I$LLAMA/include -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama */
#include <llama.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void print_ids(const struct llama_vocab* vocab, const char* text, int32_t len, int add_special) {
  int32_t cap = len + 16;
  llama_token* ids = malloc(sizeof(llama_token) * (size_t)cap);
  int32_t n = llama_tokenize(vocab, text, len, ids, cap, add_special, 1);
  if (n < 0) {
    cap = -n;
    ids = realloc(ids, sizeof(llama_token) * (size_t)cap);
    n = llama_tokenize(vocab, text, len, ids, cap, add_special, 1);
  }
  if (n < 0) printf("ERR");
  for (int32_t i = 0; i < n; ++i) printf(i ? " %d" : "%d", ids[i]);
  printf("\n");
  free(ids);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.gguf < texts\n", argv[0]);
    return 1;
  }
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.vocab_only = 1;
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  const struct llama_vocab* vocab = llama_model_get_vocab(model);
  uint8_t hdr[4];
  while (fread(hdr, 1, 4, stdin) == 4) {
    const int32_t len = (int32_t)(hdr[0] | hdr[1] << 8 | hdr[2] << 16 | (uint32_t)hdr[3] << 24);
    char* text = malloc((size_t)len + 1);
    if (fread(text, 1, (size_t)len, stdin) != (size_t)len) return 1;
    text[len] = 0;
    print_ids(vocab, text, len, 0);
    print_ids(vocab, text, len, 1);
    free(text);
  }
  llama_model_free(model);
  return 0;
}
