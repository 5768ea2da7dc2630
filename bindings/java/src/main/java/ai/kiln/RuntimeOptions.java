package ai.kiln;

/** kiln_runtime_params. The no-argument constructor holds kiln_runtime_default_params(). */
public final class RuntimeOptions {
  int threads;
  long memoryBudgetBytes;
  PerfMode perfMode;

  public RuntimeOptions() {
    Native.check();
    Native.runtimeDefaults(this);  // every field, by name
  }

  /** n_threads: worker threads, the caller's included; 0: chosen by perfMode. */
  public RuntimeOptions threads(int n) {
    threads = n;
    return this;
  }

  /** memory_budget_bytes: models and sessions held at once; 0: no budget. */
  public RuntimeOptions memoryBudgetBytes(long bytes) {
    memoryBudgetBytes = bytes;
    return this;
  }

  public RuntimeOptions perfMode(PerfMode mode) {
    perfMode = mode;
    return this;
  }

  public int threads() {
    return threads;
  }

  public long memoryBudgetBytes() {
    return memoryBudgetBytes;
  }

  public PerfMode perfMode() {
    return perfMode;
  }
}
