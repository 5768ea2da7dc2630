/* The oracle for a tiny model's logits: llama.cpp's logits at every position of a list of token ids,
 * one forward pass over the whole list (no BOS added, an f32 KV cache, no flash attention), as tests/data/hf-tiny's reference.json holds them.
 * Prints one line per position: the vocabulary's logits, %.9g.
 * Usage: llama_logits MODEL.gguf ID [ID ...]
 * Build: cc -O1 llama_logits.c -I$LLAMA/include -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama */
#include <llama.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.gguf ID [ID ...]\n", argv[0]);
    return 1;
  }
  const int n = argc - 2;
  llama_backend_init();
  struct llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = 256;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F32;  /* the default f16 cache would round the keys and values */
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;  /* the CPU flash attention accumulates in f16 */
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  struct llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = atoi(argv[2 + i]);
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) return 1;
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  for (int i = 0; i < n; ++i) {
    const float* logits = llama_get_logits_ith(ctx, i);
    for (int32_t t = 0; t < n_vocab; ++t) printf(t ? " %.9g" : "%.9g", logits[t]);
    printf("\n");
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
