/* The oracle for a tiny model: llama.cpp on a list of token ids (no BOS added, an f32 KV cache, no flash attention),
 * the prompt in one forward pass. Either its logits at every position, one line per position, the vocabulary's
 * logits %.9g (as tests/data/hf-tiny's reference.json holds them); or, with --greedy N, the N greedy tokens after
 * it (a token a step, each the argmax of the last logits), one line each: its id and its top-1 margin,
 * (best - second) / max |logit|, so that the caller can refuse a path with a near tie.
 * Usage: llama_logits MODEL.gguf [--greedy N] ID [ID ...]
 * Build: cc -O1 llama_logits.c -I$LLAMA/include -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama -lm */
#include <llama.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decodes `n` tokens at positions pos..pos+n-1; logits for every one (all) or the last. */
static int step(struct llama_context* ctx, struct llama_batch* batch, const int* ids, int n, int pos, int all) {
  for (int i = 0; i < n; ++i) {
    batch->token[i] = ids[i];
    batch->pos[i] = pos + i;
    batch->n_seq_id[i] = 1;
    batch->seq_id[i][0] = 0;
    batch->logits[i] = all || i == n - 1;
  }
  batch->n_tokens = n;
  return llama_decode(ctx, *batch);
}

/* The argmax of the last logits, and its margin over the second best. */
static int argmax(const float* logits, int32_t n_vocab, float* margin) {
  int best = 0;
  float top = -INFINITY, second = -INFINITY, biggest = 0;
  for (int32_t t = 0; t < n_vocab; ++t) {
    if (fabsf(logits[t]) > biggest) biggest = fabsf(logits[t]);
    if (logits[t] > top) {
      second = top;
      top = logits[t];
      best = t;
    } else if (logits[t] > second) {
      second = logits[t];
    }
  }
  *margin = (top - second) / biggest;
  return best;
}

int main(int argc, char** argv) {
  int first = 2, n_new = -1;
  if (argc > 3 && strcmp(argv[2], "--greedy") == 0) {
    n_new = atoi(argv[3]);
    first = 4;
  }
  if (argc <= first || n_new == 0) {
    fprintf(stderr, "usage: %s MODEL.gguf [--greedy N] ID [ID ...]\n", argv[0]);
    return 1;
  }
  const int n = argc - first;
  int* ids = malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; ++i) ids[i] = atoi(argv[first + i]);
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
  if (!ctx || n + (n_new > 0 ? n_new : 0) > 256) return 1;
  struct llama_batch batch = llama_batch_init(n, 0, 1);
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  if (step(ctx, &batch, ids, n, 0, n_new < 0) != 0) return 1;
  if (n_new < 0) {
    for (int i = 0; i < n; ++i) {
      const float* logits = llama_get_logits_ith(ctx, i);
      for (int32_t t = 0; t < n_vocab; ++t) printf(t ? " %.9g" : "%.9g", logits[t]);
      printf("\n");
    }
  }
  for (int k = 0, pos = n; k < n_new; ++k, ++pos) {
    float margin;
    int next = argmax(llama_get_logits_ith(ctx, -1), n_vocab, &margin);
    printf("%d %.6g\n", next, margin);
    if (step(ctx, &batch, &next, 1, pos, 0) != 0) return 1;
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  free(ids);
  return 0;
}
