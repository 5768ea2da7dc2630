package ai.kiln;

/** One async load: native code calls progress() and done() on kiln's loading thread. */
final class LoadSink extends AsyncCall {
  private final LoadListener listener;

  LoadSink(LoadListener listener) {
    this.listener = listener;
  }

  boolean progress(float fraction) {
    if (cancelled) {
      return false;
    }
    try {
      listener.onProgress(fraction);
    } catch (Throwable t) {
      Listeners.uncaught(t);
    }
    return !cancelled;
  }

  void done(int status, long model, String message) {
    try {
      if (status == 0) {
        listener.onLoaded(new KilnModel(model));
      } else {
        listener.onError(new KilnException(status, message));
      }
    } catch (Throwable t) {
      Listeners.uncaught(t);
    } finally {
      ended();
    }
  }

}
