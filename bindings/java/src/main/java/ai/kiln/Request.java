package ai.kiln;

import java.util.ArrayList;
import java.util.List;

/**
 * One generate or chat call as JNI reads it, field by field by name: the text as UTF-8, checked
 * before anything runs, and the GenerateOptions' values. The blocking call's GenerationStats come
 * back in {@link #stats}.
 */
final class Request {
  final boolean chat;
  final byte[] prompt;
  final byte[][] roles;
  final byte[][] contents;
  final byte[][] stop;
  final int maxTokens;
  final int addBos;
  final boolean parseSpecial;
  final byte[] grammar;     // null: none
  final byte[] jsonSchema;  // null: none
  final byte[] grammarTrigger;  // null: none
  final KilnModel draftModel;
  long draftHandle;         // draftModel's handle while the native call that reads it runs; 0: none
  final int lookupNgram;
  final int draftMax;
  GenerationStats stats;

  Request(boolean chat, String prompt, List<Message> messages, GenerateOptions options, String systemPrompt) {
    GenerateOptions o = options != null ? options : new GenerateOptions();
    this.chat = chat;
    stop = o.stopBytes();
    maxTokens = o.maxTokens;
    addBos = o.addBos;
    parseSpecial = o.parseSpecial;
    grammar = o.grammar != null ? Native.utf8(o.grammar) : null;
    jsonSchema = o.jsonSchema != null ? Native.utf8(o.jsonSchema) : null;
    grammarTrigger = o.grammarTrigger != null ? Native.utf8(o.grammarTrigger) : null;
    draftModel = o.draftModel;
    lookupNgram = o.lookupNgram;
    draftMax = o.draftMax;
    if (!chat) {
      if (prompt == null) {
        throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the prompt is null");
      }
      this.prompt = Native.utf8(prompt);
      roles = null;
      contents = null;
      return;
    }
    if (messages == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the messages are null");
    }
    List<Message> all = new ArrayList<>();
    boolean hasSystem = !messages.isEmpty() && messages.get(0) != null && "system".equals(messages.get(0).role);
    if (systemPrompt != null && !hasSystem) {
      all.add(Message.system(systemPrompt));
    }
    all.addAll(messages);
    this.prompt = null;
    roles = new byte[all.size()][];
    contents = new byte[all.size()][];
    for (int i = 0; i < all.size(); ++i) {
      Message m = all.get(i);
      if (m == null) {
        throw new KilnException(KilnStatus.INVALID_ARGUMENT, "message " + i + " is null");
      }
      roles[i] = Native.utf8(m.role);
      contents[i] = Native.utf8(m.content);
    }
  }
}
