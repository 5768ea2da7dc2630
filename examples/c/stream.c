/* Loads a model and streams a reply to stdout through kiln's C API.
 *
 *   cc -std=c11 stream.c $(pkg-config --cflags --libs kiln) -o stream
 *   ./stream model.kiln "Once upon a time" [max_tokens] [temperature]
 *
 * stdout carries exactly the generated text (as `kiln run` prints it); the numbers go to stderr. */
#include <stdio.h>
#include <stdlib.h>

#include <kiln/kiln.h>

static int on_token(void* user_data, const char* text, size_t len, const int32_t* ids, size_t n_ids) {
  (void)user_data;
  (void)ids;
  (void)n_ids;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0; /* non-zero would stop the reply */
}

static int fail(const char* what, kiln_status st) {
  fprintf(stderr, "stream: %s: %s: %s\n", what, kiln_status_name(st), kiln_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [PROMPT] [MAX_TOKENS] [TEMPERATURE]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "";
  kiln_runtime* rt = NULL;
  kiln_model* model = NULL;
  kiln_session* session = NULL;
  kiln_status st;

  kiln_runtime_params rp = kiln_runtime_default_params();
  rp.n_threads = 1;
  if ((st = kiln_runtime_create(&rp, &rt)) != KILN_OK) return fail("runtime", st);
  if ((st = kiln_model_load(rt, argv[1], NULL, &model)) != KILN_OK) return fail(argv[1], st);

  kiln_session_params sp = kiln_session_default_params();
  sp.sampling.temperature = argc > 4 ? (float)atof(argv[4]) : 0.0f;
  sp.sampling.seed = 42;
  if ((st = kiln_session_create(model, &sp, &session)) != KILN_OK) return fail("session", st);

  kiln_generate_params gp = kiln_generate_default_params();
  gp.max_tokens = argc > 3 ? atoi(argv[3]) : 200;
  kiln_generate_result result;
  result.size = sizeof result;
  st = kiln_session_generate(session, prompt, &gp, on_token, NULL, &result);
  if (st != KILN_OK) return fail("generate", st);
  fprintf(stderr, "\nstream: %d tokens, first after %.1f ms, %.1f tok/s\n", result.generated_tokens,
          result.time_to_first_token_ms, result.decode_tokens_per_second);

  kiln_session_free(session);
  kiln_model_free(model);
  kiln_runtime_free(rt);
  return 0;
}
