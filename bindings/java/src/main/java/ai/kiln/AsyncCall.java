package ai.kiln;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** What an async load and an async generation share as a Cancellable: the flag and the end. */
abstract class AsyncCall implements Cancellable {
  private final CountDownLatch done = new CountDownLatch(1);
  volatile boolean cancelled;

  /** Called once, after the listener's last callback. */
  final void ended() {
    done.countDown();
  }

  @Override
  public void cancel() {
    cancelled = true;
  }

  @Override
  public final boolean await(long timeout, TimeUnit unit) throws InterruptedException {
    return done.await(timeout, unit);
  }

  @Override
  public final boolean isDone() {
    return done.getCount() == 0;
  }
}
