/* The oracle for a real model's greedy text: llama.cpp's own decode loop over one prompt.
 * Prints, one per line, the ids of the prompt as llama.cpp tokenizes it (add_special=1,
 * parse_special=1), then the N greedy (argmax) ids, then an end-of-generation id if one came.
 * Usage: llama_greedy MODEL.gguf N "PROMPT"
 * Build: cc -O1 llama_greedy.c -I$LLAMA/include -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama */
#include <llama.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.gguf N PROMPT\n", argv[0]);
    return 1;
  }
  const int n_gen = atoi(argv[2]);
  const char* prompt = argv[3];
  llama_backend_init();
  struct llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  const struct llama_vocab* vocab = llama_model_get_vocab(model);
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 1024;
  cp.n_threads = cp.n_threads_batch = 2;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  const int32_t cap = (int32_t)strlen(prompt) + 16;
  llama_token* ids = malloc(sizeof(llama_token) * (size_t)(cap + n_gen));
  int32_t n = llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), ids, cap, 1, 1);
  if (n < 0) return 1;
  printf("prompt");
  for (int32_t i = 0; i < n; ++i) printf(" %d", ids[i]);
  printf("\ngenerated");
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  struct llama_batch batch = llama_batch_get_one(ids, n);
  for (int g = 0; g < n_gen; ++g) {
    if (llama_decode(ctx, batch) != 0) return 1;
    const float* logits = llama_get_logits_ith(ctx, -1);
    llama_token best = 0;
    for (llama_token t = 1; t < n_vocab; ++t)
      if (logits[t] > logits[best]) best = t;
    printf(" %d", best);
    if (llama_vocab_is_eog(vocab, best)) break;
    ids[n] = best;
    batch = llama_batch_get_one(&ids[n], 1);
    ++n;
  }
  printf("\n");
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
