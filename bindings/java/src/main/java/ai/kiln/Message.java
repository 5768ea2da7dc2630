package ai.kiln;

/** One message of a conversation (kiln_message): role "system", "user" or "assistant". */
public final class Message {
  public final String role;
  public final String content;

  public Message(String role, String content) {
    if (role == null || content == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "a message's role and content must not be null");
    }
    this.role = role;
    this.content = content;
  }

  public static Message system(String content) {
    return new Message("system", content);
  }

  public static Message user(String content) {
    return new Message("user", content);
  }

  public static Message assistant(String content) {
    return new Message("assistant", content);
  }
}
