package ai.kiln;

/**
 * One async generate or chat call: the native worker calls begin(), token() per piece and finish()
 * once; this turns them into the TokenListener's calls and is the caller's Cancellable.
 */
final class TokenSink extends AsyncCall {
  private final KilnSession owner;  // kept reachable while the call runs
  private final TokenListener listener;
  private static final java.util.concurrent.atomic.AtomicLong IDS = new java.util.concurrent.atomic.AtomicLong();
  /** Names this call to the native side, so that cancel() stops this call and no other. */
  final long id = IDS.incrementAndGet();
  private volatile boolean started;
  private Throwable listenerError;

  TokenSink(KilnSession owner, TokenListener listener) {
    this.owner = owner;
    this.listener = listener;
  }

  // Called from native code, on the session's worker thread.
  boolean begin() {
    started = true;
    return !cancelled;
  }

  boolean token(String text) {
    if (cancelled) {
      return false;
    }
    try {
      listener.onToken(text);
    } catch (Throwable t) {
      listenerError = t;
      return false;
    }
    return !cancelled;
  }

  void finish(int status, String message, GenerationStats stats) {
    try {
      if (stats != null) {
        owner.setLastStats(stats);
      }
      if (listenerError != null) {
        listener.onError(new KilnException(KilnException.CANCELLED,
            "stopped: TokenListener.onToken threw " + listenerError, listenerError));
      } else if (status == 0 && cancelled && stats.stopReason == StopReason.CALLBACK) {
        listener.onError(new KilnException(KilnException.CANCELLED, "cancelled"));
      } else if (status == 0) {
        listener.onDone(stats);
      } else {
        listener.onError(new KilnException(status, message));
      }
    } catch (Throwable t) {
      Listeners.uncaught(t);
    } finally {
      ended();
    }
  }

  @Override
  public void cancel() {
    super.cancel();
    // Running: also stop a prefill, which has no token callback to refuse.
    if (started && !isDone()) {
      owner.cancelCall(id);
    }
  }
}
