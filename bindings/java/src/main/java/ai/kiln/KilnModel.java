package ai.kiln;

import java.io.File;

/** kiln_model: a mapped .kiln (or a source model compiled in memory), shared by its sessions. */
public final class KilnModel implements AutoCloseable {
  private final NativeRef ref;
  private final NativeCleaner.Cleanable cleanable;
  private volatile int vocabSize;  // the sessions' logits() length, read once

  KilnModel(long handle) {
    ref = new NativeRef(handle, Native::modelFree, "KilnModel");
    cleanable = NativeCleaner.register(this, ref);
  }

  /** Loads on the calling thread (on Android: never the main thread; see loadAsync). null options: defaults. */
  public static KilnModel load(KilnRuntime runtime, String path, ModelOptions options) {
    return new KilnModel(start(runtime, path, options, null));
  }

  public static KilnModel load(KilnRuntime runtime, File path, ModelOptions options) {
    return load(runtime, path != null ? path.getPath() : null, options);
  }

  /**
   * Maps the .kiln in bytes [offset, offset + length) of the open file `fd` in place, without a
   * copy: on Android an APK asset stored uncompressed at a 16 KB-aligned offset, from
   * {@code AssetFileDescriptor afd = context.getAssets().openFd("model.kiln")}:
   * {@code loadFromFd(rt, afd.getParcelFileDescriptor().getFd(), afd.getStartOffset(), afd.getLength(), null)}.
   * length 0: to the end of the file. An offset that is not a multiple of 16384 is refused
   * (INVALID_ARGUMENT, with what to change). kiln keeps its own duplicate of the descriptor:
   * the caller's may be closed once this returns. Loads on the calling thread.
   */
  public static KilnModel loadFromFd(KilnRuntime runtime, int fd, long offset, long length, ModelOptions options) {
    if (runtime == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the runtime must not be null");
    }
    ModelOptions o = options != null ? options : new ModelOptions();
    long rt = runtime.acquire();
    try {
      return new KilnModel(Native.modelLoadFd(rt, fd, offset, length, o));
    } finally {
      runtime.release();
    }
  }

  /**
   * Loads on a thread of its own; the listener's progress and result are called there. Returns
   * at once; cancel() stops the load at its next progress point.
   */
  public static Cancellable loadAsync(KilnRuntime runtime, String path, ModelOptions options, LoadListener listener) {
    if (listener == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the LoadListener is null");
    }
    LoadSink sink = new LoadSink(listener);
    start(runtime, path, options, sink);
    return sink;
  }

  private static long start(KilnRuntime runtime, String path, ModelOptions options, LoadSink sink) {
    if (runtime == null || path == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the runtime and the path must not be null");
    }
    ModelOptions o = options != null ? options : new ModelOptions();
    long rt = runtime.acquire();
    try {
      return Native.modelLoad(rt, path, o, sink);
    } finally {
      runtime.release();
    }
  }

  /** A new conversation on this model. null options: defaults. */
  public KilnSession newSession(SessionOptions options) {
    SessionOptions o = options != null ? options : new SessionOptions();
    if (o.kvType == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "kvType is null");
    }
    long h = ref.acquire();
    try {
      int vocab = vocabSize;
      if (vocab == 0) {
        vocab = Native.modelInfo(h).vocabSize;
        vocabSize = vocab;
      }
      return new KilnSession(Native.sessionCreate(h, o), o.systemPrompt, vocab);
    } finally {
      ref.release();
    }
  }

  /**
   * The token ids of `text` (kiln_tokenize): addBos adds BOS where the vocabulary has one;
   * parseSpecial reads special tokens' text as those tokens.
   */
  public int[] tokenize(String text, boolean addBos, boolean parseSpecial) {
    if (text == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the text is null");
    }
    long h = ref.acquire();
    try {
      return Native.tokenize(h, Native.utf8(text), addBos, parseSpecial);
    } finally {
      ref.release();
    }
  }

  /** The text of `ids` (kiln_detokenize; an incomplete trailing character becomes U+FFFD). */
  public String detokenize(int... ids) {
    long h = ref.acquire();
    try {
      return Native.detokenize(h, ids);
    } finally {
      ref.release();
    }
  }

  /** The handle for a call that uses this model as another's draft; release with {@link #releaseHandle()}. */
  long acquireHandle() {
    return ref.acquire();
  }

  void releaseHandle() {
    ref.release();
  }

  public ModelInfo info() {
    long h = ref.acquire();
    try {
      return Native.modelInfo(h);
    } finally {
      ref.release();
    }
  }

  /** The weights go when the model's last session is closed too. */
  @Override
  public void close() {
    ref.run();  // throws, still open, when called from inside its own call
    cleanable.clean();
  }
}
