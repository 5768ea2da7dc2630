package ai.kiln;

/**
 * Receives an async reply, on the session's worker thread (never the caller's). Each text holds
 * whole characters only. Exactly one of onDone and onError ends each call; a cancelled call ends in
 * onError with status CANCELLED.
 */
public interface TokenListener {
  void onToken(String text);

  void onDone(GenerationStats stats);

  void onError(KilnException error);
}
