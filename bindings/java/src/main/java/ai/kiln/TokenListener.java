package ai.kiln;

/**
 * Receives an async reply, on one of the runtime's job threads (never the caller's; threads kiln
 * keeps and reuses, named "kiln-job" in the JVM). Each text holds whole characters only. Exactly one
 * of onDone and onError ends each call; a cancelled call ends in onError with status CANCELLED (a
 * call still queued when its session is closed too, on the thread of the call before it).
 */
public interface TokenListener {
  void onToken(String text);

  void onDone(GenerationStats stats);

  void onError(KilnException error);
}
