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
