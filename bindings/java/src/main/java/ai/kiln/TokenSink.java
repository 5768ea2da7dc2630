package ai.kiln;

/**
 * One async generate or chat call: native code calls token() per piece and finish() once, on the
 * runtime's job thread that runs it; this turns them into the TokenListener's calls and is the
 * caller's Cancellable. It holds the call's kiln_job while the job runs, to cancel that call and no
 * other.
 */
final class TokenSink extends AsyncCall {
  private final KilnSession owner;  // kept reachable while the call runs
  private final TokenListener listener;
  final Request request;
  private long job;           // the kiln_job from start until finish; 0 otherwise
  private boolean finished;   // finish() came (it may come before started())
  /** The job thread calling the listener, once it has called it. */
  volatile Thread thread;
  private Throwable listenerError;

  TokenSink(KilnSession owner, TokenListener listener, Request request) {
    this.owner = owner;
    this.listener = listener;
    this.request = request;
  }

  /** The job kiln_session_*_async returned; freed here when the call has already finished. */
  void started(long j) {
    synchronized (this) {
      if (!finished) {
        job = j;
        if (cancelled) {
          Native.jobCancel(j);  // cancel() came while the job was being started: stop its prefill too
        }
        return;
      }
    }
    Native.jobFree(j);
  }

  // Called from native code, on the job thread.
  boolean token(String text) {
    thread = Thread.currentThread();
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

  // Called from native code (the job's on_done), on the job thread, after the last token().
  void finish(int status, String message, GenerationStats stats) {
    thread = Thread.currentThread();
    long j;
    synchronized (this) {
      j = job;
      job = 0;
      finished = true;
    }
    if (j != 0) {
      Native.jobFree(j);  // from its own callback: kiln frees it when it ends
    }
    deliver(status, message, stats);
    owner.asyncEnded();
  }

  /** The listener's last call (onDone or onError), then the Cancellable's end. */
  void deliver(int status, String message, GenerationStats stats) {
    try {
      if (stats != null) {
        owner.setLastStats(stats);
      }
      boolean stoppedByCancel = stats != null
          && (stats.stopReason == StopReason.CANCELLED || stats.stopReason == StopReason.CALLBACK);
      if (listenerError != null) {
        listener.onError(new KilnException(KilnStatus.CANCELLED,
            "stopped: TokenListener.onToken threw " + listenerError, listenerError));
      } else if (status == 0 && cancelled && stoppedByCancel) {
        listener.onError(new KilnException(KilnStatus.CANCELLED, "cancelled"));
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
    // Running: also stop a prefill, which has no token callback to refuse (kiln_job_cancel reaches
    // this call's job only). Under the lock, finish() cannot free the job meanwhile.
    synchronized (this) {
      if (job != 0) {
        Native.jobCancel(job);
      }
    }
  }
}
