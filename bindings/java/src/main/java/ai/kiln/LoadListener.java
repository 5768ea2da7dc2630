package ai.kiln;

/** Receives an async load's progress and result, on the loading thread (never the caller's). */
public interface LoadListener {
  /** 0..1. */
  default void onProgress(float fraction) {}

  /** The model belongs to the listener: close it when done. */
  void onLoaded(KilnModel model);

  void onError(KilnException error);
}
