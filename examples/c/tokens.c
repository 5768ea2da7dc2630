/* The token level of kiln's C API: the app drives the model one token at a time and picks each
 * next token itself (here the largest logit), as a custom sampler, constrained output or
 * speculative decoding would.
 *
 *   cc -std=c11 tokens.c $(pkg-config --cflags --libs kiln) -o tokens
 *   ./tokens model.kiln "Once upon a time" [max_tokens]
 *
 * stdout carries exactly the generated text: at the greedy choice it is the text of
 * kiln_session_generate (and `kiln run --temp 0`) byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

static int fail(const char* what, kiln_status st) {
  fprintf(stderr, "tokens: %s: %s: %s\n", what, kiln_status_name(st), kiln_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [PROMPT] [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "";
  const int max_tokens = argc > 3 ? atoi(argv[3]) : 200;
  kiln_runtime* rt = NULL;
  kiln_model* model = NULL;
  kiln_session* session = NULL;
  kiln_status st;

  kiln_runtime_params rp = kiln_runtime_default_params();
  rp.n_threads = 1;
  if ((st = kiln_runtime_create(&rp, &rt)) != KILN_OK) return fail("runtime", st);
  if ((st = kiln_model_load(rt, argv[1], NULL, &model)) != KILN_OK) return fail(argv[1], st);
  kiln_model_info info;
  info.size = sizeof info;
  if ((st = kiln_model_info_get(model, &info)) != KILN_OK) return fail("info", st);
  if ((st = kiln_session_create(model, NULL, &session)) != KILN_OK) return fail("session", st);

  /* The prompt's ids: ask for the size first (KILN_E_BUFFER_TOO_SMALL says how many). */
  size_t n_prompt = 0;
  st = kiln_tokenize(model, prompt, strlen(prompt), KILN_TOKENIZE_ADD_BOS | KILN_TOKENIZE_PARSE_SPECIAL, NULL, 0,
                     &n_prompt);
  if (st != KILN_OK && st != KILN_E_BUFFER_TOO_SMALL) return fail("tokenize", st);
  int32_t* ids = malloc(sizeof(int32_t) * (n_prompt + (size_t)max_tokens));
  float* logits = malloc(sizeof(float) * (size_t)info.vocab_size);
  if (ids == NULL || logits == NULL) return 1;
  st = kiln_tokenize(model, prompt, strlen(prompt), KILN_TOKENIZE_ADD_BOS | KILN_TOKENIZE_PARSE_SPECIAL, ids,
                     n_prompt, &n_prompt);
  if (st != KILN_OK) return fail("tokenize", st);
  if ((st = kiln_session_decode(session, ids, n_prompt)) != KILN_OK) return fail("decode", st);

  size_t n = n_prompt;
  for (int i = 0; i < max_tokens; ++i) {
    if ((st = kiln_session_logits(session, logits, (size_t)info.vocab_size)) != KILN_OK) return fail("logits", st);
    int32_t best = 0;
    for (int32_t t = 1; t < info.vocab_size; ++t)
      if (logits[t] > logits[best]) best = t;
    if (best == info.eos_id) break;
    ids[n++] = best;
    if (i + 1 < max_tokens && (st = kiln_session_decode(session, &best, 1)) != KILN_OK) return fail("decode", st);
  }

  /* The reply's text: the whole sequence's text less the prompt's (a piece's leading space
   * depends on what comes before it). */
  size_t len_all = 0, len_prompt = 0;
  st = kiln_detokenize(model, ids, n, NULL, 0, &len_all);
  if (st != KILN_OK && st != KILN_E_BUFFER_TOO_SMALL) return fail("detokenize", st);
  st = kiln_detokenize(model, ids, n_prompt, NULL, 0, &len_prompt);
  if (st != KILN_OK && st != KILN_E_BUFFER_TOO_SMALL) return fail("detokenize", st);
  char* text = malloc(len_all + 1);
  if (text == NULL) return 1;
  if ((st = kiln_detokenize(model, ids, n, text, len_all + 1, &len_all)) != KILN_OK) return fail("detokenize", st);
  fwrite(text + len_prompt, 1, len_all - len_prompt, stdout);

  free(text);
  free(logits);
  free(ids);
  kiln_session_free(session);
  kiln_model_free(model);
  kiln_runtime_free(rt);
  return 0;
}
