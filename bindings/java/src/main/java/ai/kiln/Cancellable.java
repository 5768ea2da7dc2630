package ai.kiln;

import java.util.concurrent.TimeUnit;

/** An async load or generation in progress. */
public interface Cancellable {
  /** Asks it to stop at its next step (a token, a prefill chunk, a load progress point). Any thread. */
  void cancel();

  /** Waits until its listener's last callback has returned; false on timeout. */
  boolean await(long timeout, TimeUnit unit) throws InterruptedException;

  boolean isDone();
}
