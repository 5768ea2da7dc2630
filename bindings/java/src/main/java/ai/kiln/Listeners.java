package ai.kiln;

/** Where a listener's own exception goes when nothing can return it: its thread's uncaught handler. */
final class Listeners {
  private Listeners() {}

  static void uncaught(Throwable t) {
    Thread th = Thread.currentThread();
    Thread.UncaughtExceptionHandler h = th.getUncaughtExceptionHandler();
    if (h != null) {
      h.uncaughtException(th, t);
    }
  }
}
