package ai.kiln;

import java.io.File;
import java.util.ArrayDeque;
import java.util.List;

/**
 * kiln_session: one conversation (its KV cache, sampler and position). Blocking calls run on the
 * caller's thread. Async calls run on the runtime's job threads (kiln_session_generate_async /
 * kiln_session_chat_async: threads the runtime keeps and reuses; the binding starts none), one
 * call of a session after another in the order they were made, and their listeners are called
 * there. cancel() may be called from any thread.
 *
 * Two levels work on the same KV cache: text (generate, chat) and tokens (decode, logits, sample,
 * truncate, nPast), for an app's own sampler, speculative decoding or constrained output.
 */
public final class KilnSession implements AutoCloseable {
  private final NativeRef ref;
  private final NativeCleaner.Cleanable cleanable;
  private final String systemPrompt;
  private final int vocabSize;
  private volatile GenerationStats lastStats;

  // The async calls: the one whose job runs (or whose listener is being called) and those waiting.
  private final Object asyncLock = new Object();
  private TokenSink running;
  private final ArrayDeque<TokenSink> queued = new ArrayDeque<>();
  private boolean closing;

  KilnSession(long handle, String systemPrompt, int vocabSize) {
    ref = new NativeRef(handle, Native::sessionFree, "KilnSession");
    cleanable = NativeCleaner.register(this, ref);
    this.systemPrompt = systemPrompt;
    this.vocabSize = vocabSize;
  }

  /**
   * Continues the session with `prompt` and returns the reply. Each call takes the whole text the
   * model should see: what the KV cache holds from the previous call is reused where the prompt
   * starts with it. A cancel() ends it with KilnException CANCELLED. Waits for the session's async
   * calls to end first.
   */
  public String generate(String prompt, GenerateOptions options) {
    return run(new Request(false, prompt, null, options, systemPrompt));
  }

  /** The reply to a whole conversation, through the model's chat template. */
  public String chat(List<Message> messages, GenerateOptions options) {
    return run(new Request(true, null, messages, options, systemPrompt));
  }

  /**
   * generate() on one of the runtime's job threads: returns at once; the listener gets the pieces
   * there. Calls made while another runs wait for it, in order.
   */
  public Cancellable generateAsync(String prompt, GenerateOptions options, TokenListener listener) {
    return runAsync(new Request(false, prompt, null, options, systemPrompt), listener);
  }

  public Cancellable chatAsync(List<Message> messages, GenerateOptions options, TokenListener listener) {
    return runAsync(new Request(true, null, messages, options, systemPrompt), listener);
  }

  /** Stops the generation in progress before its next step (a prefill chunk or a token). Any thread. */
  public void cancel() {
    long h;
    try {
      h = ref.acquire();
    } catch (KilnException closed) {
      return;  // nothing runs on a closed session
    }
    try {
      Native.sessionCancel(h);
    } finally {
      ref.release();
    }
  }

  /**
   * The sampling of the next calls (generate, chat, sample()); the KV cache stays. Out-of-range
   * values are KilnException INVALID_ARGUMENT, the sampling unchanged.
   */
  public void setSampling(SamplingOptions sampling) {
    long h = acquireIdle();
    try {
      Native.sessionSetSampling(h, sampling);
    } finally {
      ref.release();
    }
  }

  /** Forgets the conversation: the next call starts at position 0. */
  public void reset() {
    long h = acquireIdle();
    try {
      Native.sessionReset(h);
    } finally {
      ref.release();
    }
  }

  /** The tokens and KV cache to `file` (written to a temporary file and renamed). */
  public void save(File file) {
    long h = acquireIdle(file);
    try {
      Native.sessionSave(h, file.getPath());
    } finally {
      ref.release();
    }
  }

  /** Reads a file save() wrote for this model, nCtx and kvType; anything else is refused, the session unchanged. */
  public void restore(File file) {
    long h = acquireIdle(file);
    try {
      Native.sessionRestore(h, file.getPath());
    } finally {
      ref.release();
    }
  }

  /** The session's state now (any thread, during a call too). */
  public SessionStats stats() {
    long h = ref.acquire();
    try {
      return Native.sessionStats(h);
    } finally {
      ref.release();
    }
  }

  /** Tokens the KV cache holds (live during a call). */
  public int position() {
    return stats().position;
  }

  /** The statistics of the last call that finished (null before any). */
  public GenerationStats lastStats() {
    return lastStats;
  }

  // ---- token level (kiln_session_decode, _logits, _n_past, _truncate, _sample) ----------------

  /**
   * Appends `ids` at the session's position and computes the logits of the last: several ids run as
   * prefill steps, one as a decode step shared with the model's other sessions decoding then. An id
   * outside the vocabulary, or more than the context has room for, is refused with nothing decoded.
   */
  public void decode(int... ids) {
    if (ids == null || ids.length == 0) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "decode: no ids");
    }
    long h = acquireIdle();
    try {
      Native.sessionDecode(h, ids);
    } finally {
      ref.release();
    }
  }

  /** The last decode's logits, one per vocabulary entry (before any decode, or after a generate: INVALID_ARGUMENT). */
  public float[] logits() {
    float[] out = new float[vocabSize];
    logits(out);
    return out;
  }

  /**
   * The last decode's logits into `out`'s first vocabSize() floats; a shorter array is
   * KilnException BUFFER_TOO_SMALL (nothing written). Returns vocabSize().
   */
  public int logits(float[] out) {
    if (out == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "logits: the array is null");
    }
    long h = acquireIdle();
    try {
      Native.sessionLogits(h, out, Math.min(out.length, vocabSize));
    } finally {
      ref.release();
    }
    return vocabSize;
  }

  /** The length logits() has: the model's vocabulary. */
  public int vocabSize() {
    return vocabSize;
  }

  /** The tokens the KV cache holds: the next decode's position. */
  public int nPast() {
    long h = acquireIdle();
    try {
      return Native.sessionNPast(h);
    } finally {
      ref.release();
    }
  }

  /**
   * Drops the positions from nKeep on (0 &lt;= nKeep &lt;= nPast()): the next decode continues there
   * and, given the same ids, computes the same logits bit for bit.
   */
  public void truncate(int nKeep) {
    long h = acquireIdle();
    try {
      Native.sessionTruncate(h, nKeep);
    } finally {
      ref.release();
    }
  }

  /**
   * A token from the last decode's logits with the session's sampling (SessionOptions' temperature,
   * top-k, ...; at temperature 0 the argmax). Not decoded: pass it to decode() (or not).
   */
  public int sample() {
    long h = acquireIdle();
    try {
      return Native.sessionSample(h);
    } finally {
      ref.release();
    }
  }

  /**
   * Cancels what runs, ends queued async calls with onError(CANCELLED), waits for the running one's
   * listener to return (unless called from it) and frees the session.
   */
  @Override
  public void close() {
    TokenSink r;
    synchronized (asyncLock) {
      closing = true;
      r = running;
    }
    if (r != null) {
      r.cancel();
    }
    cancel();
    awaitAsyncIdle();
    ref.run();  // throws, still open, when called from inside its own blocking call
    cleanable.clean();
  }

  void setLastStats(GenerationStats stats) {
    lastStats = stats;
  }

  // ---- the async calls' order ------------------------------------------------------------------

  private Cancellable runAsync(Request request, TokenListener listener) {
    if (listener == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the TokenListener is null");
    }
    TokenSink sink = new TokenSink(this, listener, request);
    synchronized (asyncLock) {
      if (closing) {
        throw new KilnException(KilnStatus.INVALID_ARGUMENT, "KilnSession is closed");
      }
      if (running != null) {
        queued.add(sink);
        return sink;
      }
      running = sink;
    }
    try {
      start(sink);
    } catch (KilnException e) {
      advance();  // the caller gets the exception; calls queued meanwhile go on
      throw e;
    }
    return sink;
  }

  /** Starts `sink`'s job (kiln_session_generate_async / _chat_async). */
  private void start(TokenSink sink) {
    long h = ref.acquire();
    try {
      acquireDraft(sink.request);
      try {
        sink.started(Native.sessionStartAsync(h, sink.request, sink));
      } finally {
        releaseDraft(sink.request);
      }
    } finally {
      ref.release();
    }
  }

  /** On the job thread, after a call's listener returned: the next queued call, if any, starts. */
  void asyncEnded() {
    advance();
  }

  private void advance() {
    for (;;) {
      TokenSink next;
      boolean closed;
      synchronized (asyncLock) {
        next = queued.poll();
        if (next == null) {
          running = null;
          asyncLock.notifyAll();
          return;
        }
        running = next;
        closed = closing;
      }
      if (closed || next.cancelled) {
        next.deliver(KilnStatus.CANCELLED.value(), closed ? "the session was closed" : "cancelled before it started",
            null);
        continue;
      }
      try {
        start(next);
        return;  // its finish continues the chain
      } catch (KilnException e) {
        next.deliver(e.code(), e.detail(), null);
      }
    }
  }

  /** Waits until no async call runs, unless this thread is the running call's (its listener). */
  private void awaitAsyncIdle() {
    boolean interrupted = false;
    synchronized (asyncLock) {
      while (running != null && running.thread != Thread.currentThread()) {
        try {
          asyncLock.wait();
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /** The handle for a call that changes the session: after its async calls (kiln.h's rule). */
  private long acquireIdle() {
    ref.acquire();  // a closed session throws here, before any wait
    ref.release();
    awaitAsyncIdle();
    return ref.acquire();
  }

  private long acquireIdle(File file) {
    if (file == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the file is null");
    }
    return acquireIdle();
  }

  private String run(Request request) {
    long h = acquireIdle();
    try {
      acquireDraft(request);
      try {
        String text = Native.sessionRun(h, request);
        lastStats = request.stats;
        return text;
      } finally {
        releaseDraft(request);
      }
    } finally {
      ref.release();
    }
  }

  // The draft model's handle is held while the native call reads it; kiln keeps its own reference
  // to the model for the session's draft (an async call's too), so closing it later is safe.
  private static void acquireDraft(Request request) {
    if (request.draftModel != null) {
      request.draftHandle = request.draftModel.acquireHandle();
    }
  }

  private static void releaseDraft(Request request) {
    if (request.draftHandle != 0) {
      request.draftHandle = 0;
      request.draftModel.releaseHandle();
    }
  }
}
