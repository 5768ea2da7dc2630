package ai.kiln;

import java.io.File;
import java.util.ArrayList;
import java.util.List;

/**
 * kiln_session: one conversation (its KV cache, sampler and position). Blocking calls run on the
 * caller's thread; async ones run one after another on the session's own native thread, which
 * also delivers their callbacks. cancel() may be called from any thread.
 */
public final class KilnSession implements AutoCloseable {
  private final NativeRef ref;
  private final NativeCleaner.Cleanable cleanable;
  private final String systemPrompt;
  private volatile GenerationStats lastStats;

  KilnSession(long handle, String systemPrompt) {
    ref = new NativeRef(handle, Native::sessionFree, "KilnSession");
    cleanable = NativeCleaner.register(this, ref);
    this.systemPrompt = systemPrompt;
  }

  /**
   * Continues the session with `prompt` and returns the reply. Each call takes the whole text the
   * model should see: what the KV cache holds from the previous call is reused where the prompt
   * starts with it. A cancel() ends it with KilnException CANCELLED.
   */
  public String generate(String prompt, GenerateOptions options) {
    return run(false, prompt, null, options);
  }

  /** The reply to a whole conversation, through the model's chat template. */
  public String chat(List<Message> messages, GenerateOptions options) {
    return run(true, null, messages, options);
  }

  /** generate() on the session's thread: returns at once; the listener gets the pieces. */
  public Cancellable generateAsync(String prompt, GenerateOptions options, TokenListener listener) {
    return runAsync(false, prompt, null, options, listener);
  }

  public Cancellable chatAsync(List<Message> messages, GenerateOptions options, TokenListener listener) {
    return runAsync(true, null, messages, options, listener);
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

  /** Cancels the async call `id` if it is the one running now. */
  void cancelCall(long id) {
    long h;
    try {
      h = ref.acquire();
    } catch (KilnException closed) {
      return;  // closing cancels it anyway
    }
    try {
      Native.sessionCancelCall(h, id);
    } finally {
      ref.release();
    }
  }

  /** Forgets the conversation: the next call starts at position 0. */
  public void reset() {
    long h = ref.acquire();
    try {
      Native.sessionReset(h);
    } finally {
      ref.release();
    }
  }

  /** The tokens and KV cache to `file` (written to a temporary file and renamed). */
  public void save(File file) {
    saveOrRestore(file, false);
  }

  /** Reads a file save() wrote for this model, nCtx and kvType; anything else is refused, the session unchanged. */
  public void restore(File file) {
    saveOrRestore(file, true);
  }

  /** The session's state now (any thread, during a call too). */
  public SessionStats stats() {
    long h = ref.acquire();
    try {
      return new SessionStats(Native.sessionStats(h));
    } finally {
      ref.release();
    }
  }

  /** Tokens the KV cache holds (live during a call). */
  public int position() {
    long h = ref.acquire();
    try {
      return (int) Native.sessionStats(h)[1];
    } finally {
      ref.release();
    }
  }

  /** The statistics of the last call that finished (null before any). */
  public GenerationStats lastStats() {
    return lastStats;
  }

  /** Cancels what runs, ends queued async calls with CANCELLED, and frees the session. */
  @Override
  public void close() {
    cancel();
    ref.run();  // throws, still open, when called from inside its own blocking call
    cleanable.clean();
  }

  void setLastStats(GenerationStats stats) {
    lastStats = stats;
  }

  private void saveOrRestore(File file, boolean restore) {
    if (file == null) {
      throw new KilnException(KilnException.INVALID_ARGUMENT, "the file is null");
    }
    long h = ref.acquire();
    try {
      Native.sessionSave(h, Native.utf8(file.getPath()), restore);
    } finally {
      ref.release();
    }
  }

  private String run(boolean chat, String prompt, List<Message> messages, GenerateOptions options) {
    Args a = new Args(chat, prompt, messages, options);
    GenerationStats[] stats = new GenerationStats[1];
    long h = ref.acquire();
    try {
      String text = Native.sessionRun(h, chat, a.prompt, a.roles, a.contents, a.o.maxTokens, a.stop, a.o.addBos,
          a.o.parseSpecial ? 1 : 0, stats);
      lastStats = stats[0];
      return text;
    } finally {
      ref.release();
    }
  }

  private Cancellable runAsync(boolean chat, String prompt, List<Message> messages, GenerateOptions options,
      TokenListener listener) {
    if (listener == null) {
      throw new KilnException(KilnException.INVALID_ARGUMENT, "the TokenListener is null");
    }
    Args a = new Args(chat, prompt, messages, options);
    TokenSink sink = new TokenSink(this, listener);
    long h = ref.acquire();
    try {
      Native.sessionRunAsync(h, chat, a.prompt, a.roles, a.contents, a.o.maxTokens, a.stop, a.o.addBos,
          a.o.parseSpecial ? 1 : 0, sink, sink.id);
    } finally {
      ref.release();
    }
    return sink;
  }

  /** A call's arguments as UTF-8, checked before anything runs. */
  private final class Args {
    final GenerateOptions o;
    final byte[] prompt;
    final byte[][] roles;
    final byte[][] contents;
    final byte[][] stop;

    Args(boolean chat, String prompt, List<Message> messages, GenerateOptions options) {
      o = options != null ? options : new GenerateOptions();
      stop = o.stopBytes();
      if (!chat) {
        if (prompt == null) {
          throw new KilnException(KilnException.INVALID_ARGUMENT, "the prompt is null");
        }
        this.prompt = Native.utf8(prompt);
        roles = null;
        contents = null;
        return;
      }
      if (messages == null) {
        throw new KilnException(KilnException.INVALID_ARGUMENT, "the messages are null");
      }
      List<Message> all = new ArrayList<>();
      boolean hasSystem = !messages.isEmpty() && messages.get(0) != null && "system".equals(messages.get(0).role);
      if (systemPrompt != null && !hasSystem) {
        all.add(Message.system(systemPrompt));
      }
      all.addAll(messages);
      this.prompt = null;
      roles = new byte[all.size()][];
      contents = new byte[all.size()][];
      for (int i = 0; i < all.size(); ++i) {
        Message m = all.get(i);
        if (m == null) {
          throw new KilnException(KilnException.INVALID_ARGUMENT, "message " + i + " is null");
        }
        roles[i] = Native.utf8(m.role);
        contents[i] = Native.utf8(m.content);
      }
    }
  }
}
