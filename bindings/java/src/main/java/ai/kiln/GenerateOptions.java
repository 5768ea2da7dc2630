package ai.kiln;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** kiln_generate_params. The no-argument constructor holds kiln_generate_default_params(). */
public final class GenerateOptions {
  int maxTokens;
  List<String> stop = new ArrayList<>();
  int addBos;  // kiln_generate_params.add_bos: -1 the model's rule, 0 no, 1 yes
  boolean parseSpecial;
  String grammar;       // kiln_generate_params.grammar: GBNF; null: none
  String jsonSchema;    // kiln_generate_params.json_schema; null: none
  String grammarTrigger; // kiln_generate_params.grammar_trigger; null: the grammar holds from the start
  KilnModel draftModel; // kiln_generate_params.draft_model; null: none
  int lookupNgram;      // kiln_generate_params.lookup_ngram; 0: off
  int draftMax;         // kiln_generate_params.draft_max; 0: the runtime's default

  public GenerateOptions() {
    Native.check();
    Native.generateDefaults(this);  // every field, by name
  }

  /** New tokens at most. */
  public GenerateOptions maxTokens(int n) {
    maxTokens = n;
    return this;
  }

  /** Stop strings (not emitted); none or null: no stop strings. */
  public GenerateOptions stop(String... strings) {
    stop = strings != null ? new ArrayList<>(Arrays.asList(strings)) : new ArrayList<>();
    return this;
  }

  /** generate(): add BOS (true), do not (false), or follow the model's rule (null, the default). */
  public GenerateOptions addBos(Boolean a) {
    addBos = a == null ? -1 : a ? 1 : 0;
    return this;
  }

  /** generate(): read special tokens' text in the prompt as those tokens. */
  public GenerateOptions parseSpecial(boolean p) {
    parseSpecial = p;
    return this;
  }

  /**
   * Constrained output: the reply is text this GBNF grammar (llama.cpp's format, root ::= ...)
   * allows; null: none. A grammar that does not parse is a KilnException INVALID_ARGUMENT at the
   * call, naming its line and column. At most one of grammar and jsonSchema.
   */
  public GenerateOptions grammar(String gbnf) {
    grammar = gbnf;
    return this;
  }

  /**
   * Constrained output: the reply is JSON valid against this JSON Schema (its text); null: none. An
   * unsupported keyword is a KilnException INVALID_ARGUMENT naming it.
   */
  public GenerateOptions jsonSchema(String schema) {
    jsonSchema = schema;
    return this;
  }

  /**
   * A lazy grammar: the reply is free until this text appears in it, and from its first character
   * on follows the grammar (or schema), which starts with it (a tool call inside a free reply);
   * null (the default): the grammar holds from the reply's start. Without a grammar it is a
   * KilnException INVALID_ARGUMENT at the call.
   */
  public GenerateOptions grammarTrigger(String trigger) {
    grammarTrigger = trigger;
    return this;
  }

  /**
   * Speculative decoding with a draft model: a smaller model of the same vocabulary, on the same
   * runtime; null: none. Greedy text is the text without; sampling keeps the model's distribution.
   */
  public GenerateOptions draftModel(KilnModel model) {
    draftModel = model;
    return this;
  }

  /** Speculative decoding by prompt lookup (no draft model): drafts what followed the last n tokens earlier; 0: off. */
  public GenerateOptions lookupNgram(int n) {
    lookupNgram = n;
    return this;
  }

  /** The most tokens drafted per step (the count adapts below it); 0: the runtime's default (8). */
  public GenerateOptions draftMax(int n) {
    draftMax = n;
    return this;
  }

  public String grammar() {
    return grammar;
  }

  public String jsonSchema() {
    return jsonSchema;
  }

  public String grammarTrigger() {
    return grammarTrigger;
  }

  public KilnModel draftModel() {
    return draftModel;
  }

  public int lookupNgram() {
    return lookupNgram;
  }

  public int draftMax() {
    return draftMax;
  }

  public int maxTokens() {
    return maxTokens;
  }

  public List<String> stop() {
    return java.util.Collections.unmodifiableList(new ArrayList<>(stop));
  }

  /** null: the model's rule. */
  public Boolean addBos() {
    return addBos < 0 ? null : addBos != 0;
  }

  public boolean parseSpecial() {
    return parseSpecial;
  }

  byte[][] stopBytes() {
    byte[][] out = new byte[stop.size()][];
    for (int i = 0; i < out.length; ++i) {
      if (stop.get(i) == null) {
        throw new KilnException(KilnStatus.INVALID_ARGUMENT, "a stop string is null");
      }
      out[i] = Native.utf8(stop.get(i));
    }
    return out;
  }
}
