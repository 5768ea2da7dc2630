package ai.kiln;

import java.lang.ref.PhantomReference;
import java.lang.ref.ReferenceQueue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Frees what a forgotten close() left, once the collector finds the object unreachable: what
 * java.lang.ref.Cleaner does, written out because Android has Cleaner only from API 33 and apps
 * target older devices. One daemon thread runs the actions.
 */
final class NativeCleaner {
  private static final ReferenceQueue<Object> QUEUE = new ReferenceQueue<>();
  // The registered references themselves must stay reachable until they are enqueued.
  private static final Set<Cleanable> LIVE = ConcurrentHashMap.newKeySet();

  static {
    Thread t = new Thread(NativeCleaner::loop, "kiln-cleaner");
    t.setDaemon(true);
    t.start();
  }

  private NativeCleaner() {}

  static final class Cleanable extends PhantomReference<Object> {
    private final Runnable action;

    private Cleanable(Object owner, Runnable action) {
      super(owner, QUEUE);
      this.action = action;
    }

    /** Runs the action now, once (close() calls it; then the collector has nothing left to do). */
    void clean() {
      if (LIVE.remove(this)) {
        action.run();
      }
    }
  }

  /** `action` must not refer to `owner`, or owner never becomes unreachable. */
  static Cleanable register(Object owner, Runnable action) {
    Cleanable c = new Cleanable(owner, action);
    LIVE.add(c);
    return c;
  }

  private static void loop() {
    for (;;) {
      try {
        ((Cleanable) QUEUE.remove()).clean();
      } catch (InterruptedException e) {
        return;
      } catch (Throwable t) {
        Listeners.uncaught(t);  // one failed action must not end the thread that runs the others
      }
    }
  }
}
