package ai.kiln;


/** kiln_runtime: the worker threads and the memory budget its models and sessions share. */
public final class KilnRuntime implements AutoCloseable {
  private final NativeRef ref;
  private final NativeCleaner.Cleanable cleanable;

  private KilnRuntime(long handle) {
    ref = new NativeRef(handle, Native::runtimeFree, "KilnRuntime");
    cleanable = NativeCleaner.register(this, ref);
  }

  /** null: the defaults. */
  public static KilnRuntime create(RuntimeOptions options) {
    RuntimeOptions o = options != null ? options : new RuntimeOptions();
    if (o.perfMode == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "perfMode is null");
    }
    return new KilnRuntime(Native.runtimeCreate(o));
  }

  /**
   * Releases what can be released now (an app's onTrimMemory): idle models are unmapped and idle
   * sessions' KV caches moved to snapshot files; both come back when used. Returns the bytes released.
   */
  public long trim() {
    long h = ref.acquire();
    try {
      return Native.runtimeTrim(h);
    } finally {
      ref.release();
    }
  }

  public RuntimeStats stats() {
    long h = ref.acquire();
    try {
      return Native.runtimeStats(h);
    } finally {
      ref.release();
    }
  }

  long acquire() {
    return ref.acquire();
  }

  void release() {
    ref.release();
  }

  /** The native runtime goes once its models are closed too (they keep it alive). */
  @Override
  public void close() {
    ref.run();  // throws, still open, when called from inside its own call
    cleanable.clean();
  }
}
