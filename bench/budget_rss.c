/* The memory budget against the resident memory the kernel counts (issue 18: "RSS measured never
 * passes the budget by more than 64 MiB"). Two models whose sum passes the budget take turns
 * generating; each turn makes the runtime evict the idle one. A thread samples VmRSS every 2 ms.
 *
 *   budget_rss BUDGET_MIB MODEL_A MODEL_B [ROUNDS] [TOKENS]
 *
 * Prints the budget, the runtime's peak held bytes, the evictions, and the largest RSS over the
 * process's RSS before the first load (the binary, libc, the thread pool's stacks); exits 1 when
 * that passes the budget by more than 64 MiB. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kiln/kiln.h>

static unsigned long long rss_bytes(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024;
}

static atomic_int g_stop;
static atomic_ullong g_max_rss;

static void* sample(void* arg) {
  (void)arg;
  const struct timespec two_ms = {0, 2000000};
  while (!atomic_load(&g_stop)) {
    const unsigned long long r = rss_bytes();
    unsigned long long m = atomic_load(&g_max_rss);
    while (r > m && !atomic_compare_exchange_weak(&g_max_rss, &m, r)) {
    }
    nanosleep(&two_ms, NULL);
  }
  return NULL;
}

static int fail(const char* what, kiln_status st) {
  fprintf(stderr, "budget_rss: %s: %s: %s\n", what, kiln_status_name(st), kiln_last_error());
  return 2;
}

static double mib(unsigned long long b) { return (double)b / (1024.0 * 1024.0); }

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s BUDGET_MIB MODEL_A MODEL_B [ROUNDS] [TOKENS]\n", argv[0]);
    return 2;
  }
  const unsigned long long budget = strtoull(argv[1], NULL, 10) << 20;
  const int rounds = argc > 4 ? atoi(argv[4]) : 3;
  const int tokens = argc > 5 ? atoi(argv[5]) : 16;
  kiln_runtime_params rp = kiln_runtime_default_params();
  rp.memory_budget_bytes = budget;
  kiln_runtime* rt = NULL;
  kiln_status st = kiln_runtime_create(&rp, &rt);
  if (st != KILN_OK) return fail("runtime", st);
  const unsigned long long base = rss_bytes();
  atomic_store(&g_max_rss, base);
  pthread_t sampler;
  if (pthread_create(&sampler, NULL, sample, NULL) != 0) return 2;

  kiln_model* models[2] = {NULL, NULL};
  kiln_session* sessions[2] = {NULL, NULL};
  kiln_session_params sp = kiln_session_default_params();
  sp.n_ctx = 256;
  sp.sampling.temperature = 0.0f;
  for (int m = 0; m < 2; ++m) {
    if ((st = kiln_model_load(rt, argv[2 + m], NULL, &models[m])) != KILN_OK) return fail(argv[2 + m], st);
    if ((st = kiln_session_create(models[m], &sp, &sessions[m])) != KILN_OK) return fail("session", st);
  }
  kiln_generate_params gp = kiln_generate_default_params();
  gp.max_tokens = tokens;
  for (int r = 0; r < rounds; ++r) {
    for (int m = 0; m < 2; ++m) {
      kiln_session_reset(sessions[m]);
      kiln_generate_result res;
      res.size = sizeof res;
      if ((st = kiln_session_generate(sessions[m], "Once upon a time", &gp, NULL, NULL, &res)) != KILN_OK)
        return fail("generate", st);
      fprintf(stderr, "round %d model %c: %d tokens, RSS now %.1f MiB\n", r, 'A' + m, res.generated_tokens,
              mib(rss_bytes()));
    }
  }
  atomic_store(&g_stop, 1);
  pthread_join(sampler, NULL);
  kiln_runtime_stats rs;
  rs.size = sizeof rs;
  kiln_runtime_stats_get(rt, &rs);
  const unsigned long long over = atomic_load(&g_max_rss) - base;
  const unsigned long long limit = budget + (64ull << 20);
  printf("budget %.1f MiB; runtime's peak held %.1f MiB; %d evictions; RSS before loading %.1f MiB, largest "
         "%.1f MiB: %.1f MiB over it, %s budget + 64 MiB (%.1f MiB)\n",
         mib(budget), mib(rs.peak_held_bytes), rs.n_evictions, mib(base), mib(atomic_load(&g_max_rss)), mib(over),
         over <= limit ? "within" : "OVER", mib(limit));
  for (int m = 0; m < 2; ++m) {
    kiln_session_free(sessions[m]);
    kiln_model_free(models[m]);
  }
  kiln_runtime_free(rt);
  return over <= limit ? 0 : 1;
}
