/* How long kiln_session_cancel takes to stop a generation (issue 18: "cancel ... promptly"):
 * a generation runs on a thread, the main thread cancels it after a random delay and times the
 * moment the call returns. Prefill (a long prompt, one new token) and decode (a short prompt, many
 * tokens) separately.
 *
 *   cancel_latency MODEL [TRIALS] [THREADS]
 *
 * Prints, per phase, the median and the largest latency over the trials that were cancelled
 * (a trial whose generation ended before the cancel is not counted). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kiln/kiln.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

typedef struct {
  kiln_session* session;
  const char* prompt;
  int max_tokens;
  kiln_status status;
  double returned_ms;
} job;

static void* run(void* arg) {
  job* j = (job*)arg;
  kiln_generate_params gp = kiln_generate_default_params();
  gp.max_tokens = j->max_tokens;
  j->status = kiln_session_generate(j->session, j->prompt, &gp, NULL, NULL, NULL);
  j->returned_ms = now_ms();
  return NULL;
}

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* One phase: `trials` generations cancelled after a delay drawn from [lo, hi) ms. */
static void phase(kiln_session* s, const char* name, const char* prompt, int max_tokens, double lo, double hi,
                  int trials) {
  double lat[256];
  int n = 0;
  for (int t = 0; t < trials && n < 256; ++t) {
    kiln_session_reset(s);
    job j = {s, prompt, max_tokens, KILN_OK, 0};
    pthread_t th;
    if (pthread_create(&th, NULL, run, &j) != 0) return;
    const double delay = lo + (hi - lo) * (double)rand() / ((double)RAND_MAX + 1.0);
    const struct timespec d = {(time_t)(delay / 1e3), (long)(delay * 1e6) % 1000000000L};
    nanosleep(&d, NULL);
    const double cancelled = now_ms();
    kiln_session_cancel(s);
    pthread_join(th, NULL);
    if (j.status == KILN_E_CANCELLED) lat[n++] = j.returned_ms - cancelled;
  }
  if (n == 0) {
    printf("%-8s no trial was cancelled before it ended\n", name);
    return;
  }
  qsort(lat, (size_t)n, sizeof lat[0], cmp);
  printf("%-8s cancel took %.2f ms median, %.2f ms at most (%d trials cancelled of %d)\n", name, lat[n / 2],
         lat[n - 1], n, trials);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [TRIALS] [THREADS]\n", argv[0]);
    return 2;
  }
  const int trials = argc > 2 ? atoi(argv[2]) : 10;
  kiln_runtime_params rp = kiln_runtime_default_params();
  rp.n_threads = argc > 3 ? atoi(argv[3]) : 0;
  kiln_runtime* rt = NULL;
  kiln_model* model = NULL;
  kiln_session* s = NULL;
  kiln_status st;
  if ((st = kiln_runtime_create(&rp, &rt)) != KILN_OK || (st = kiln_model_load(rt, argv[1], NULL, &model)) != KILN_OK) {
    fprintf(stderr, "cancel_latency: %s: %s\n", kiln_status_name(st), kiln_last_error());
    return 2;
  }
  kiln_session_params sp = kiln_session_default_params();
  sp.n_ctx = 1024;
  sp.sampling.temperature = 0.0f;
  if ((st = kiln_session_create(model, &sp, &s)) != KILN_OK) {
    fprintf(stderr, "cancel_latency: %s: %s\n", kiln_status_name(st), kiln_last_error());
    return 2;
  }
  /* About 500 tokens of prompt. */
  static char prompt[8192];
  prompt[0] = 0;
  for (int i = 0; i < 18; ++i) strcat(prompt, "Once upon a time there was a little girl. ");
  /* How long the whole prefill takes, to draw the delays inside it. */
  double t0 = now_ms();
  kiln_generate_params gp = kiln_generate_default_params();
  gp.max_tokens = 1;
  kiln_generate_result res;
  res.size = sizeof res;
  if ((st = kiln_session_generate(s, prompt, &gp, NULL, NULL, &res)) != KILN_OK) {
    fprintf(stderr, "cancel_latency: %s: %s\n", kiln_status_name(st), kiln_last_error());
    return 2;
  }
  const double prefill_ms = now_ms() - t0;
  printf("prefill of %d tokens: %.0f ms\n", res.prompt_tokens, prefill_ms);
  srand(7);
  phase(s, "prefill", prompt, 1, 0.05 * prefill_ms, 0.9 * prefill_ms, trials);
  phase(s, "decode", "Once upon a time", 100000, 200.0, 1200.0, trials);
  kiln_session_free(s);
  kiln_model_free(model);
  kiln_runtime_free(rt);
  return 0;
}
