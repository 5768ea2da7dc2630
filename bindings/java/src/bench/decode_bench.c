/* The C side of the Java binding's overhead measurement: the same generation as DecodeBench.java
 * (greedy, a fixed prompt, a token callback that takes the text), straight on kiln.h.
 *   decode_bench MODEL THREADS TOKENS REPS
 * One line per rep: "c decode_tok_s D wall_ms W tokens N". */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kiln/kiln.h>

static int on_token(void* user, const char* text, size_t len, const int32_t* ids, size_t n_ids) {
  (void)ids;
  (void)n_ids;
  *(size_t*)user += len + (len > 0 ? (unsigned char)text[0] & 1 : 0); /* touch the text */
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s MODEL THREADS TOKENS REPS\n", argv[0]);
    return 2;
  }
  kiln_runtime_params rp = kiln_runtime_default_params();
  rp.n_threads = atoi(argv[2]);
  kiln_runtime* rt = NULL;
  kiln_model* model = NULL;
  if (kiln_runtime_create(&rp, &rt) != KILN_OK || kiln_model_load(rt, argv[1], NULL, &model) != KILN_OK) {
    fprintf(stderr, "decode_bench: %s\n", kiln_last_error());
    return 1;
  }
  kiln_session_params sp = kiln_session_default_params();
  sp.sampling.temperature = 0.0f;
  sp.n_ctx = 512;
  kiln_generate_params gp = kiln_generate_default_params();
  gp.max_tokens = atoi(argv[3]);
  for (int rep = 0; rep < atoi(argv[4]); ++rep) {
    kiln_session* s = NULL;
    if (kiln_session_create(model, &sp, &s) != KILN_OK) return 1;
    kiln_generate_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    size_t bytes = 0;
    const double t0 = now_ms();
    if (kiln_session_generate(s, "Once upon a time", &gp, on_token, &bytes, &r) != KILN_OK) {
      fprintf(stderr, "decode_bench: %s\n", kiln_last_error());
      return 1;
    }
    printf("c decode_tok_s %.3f wall_ms %.1f tokens %d\n", r.decode_tokens_per_second, now_ms() - t0, r.generated_tokens);
    fflush(stdout);
    kiln_session_free(s);
  }
  kiln_model_free(model);
  kiln_runtime_free(rt);
  return 0;
}
