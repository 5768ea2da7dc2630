package ai.kiln.test;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * A llama2.c checkpoint and tokenizer made so that greedy decoding must spell a known text with
 * CJK and 4-byte emoji, one of them split over four byte tokens. Every layer's weights are zero,
 * so the residual stream is the current token's embedding (one-hot for the tokens of the chain);
 * the unshared classifier maps each of them to the next token of the chain: a successor table.
 */
final class ChainModel {
  static final String TEXT = "\u4f60\u597d\ud83d\ude00 \u4e16\u754c\ud83c\udf0d";  // 你好😀 世界🌍

  private static final String[] EXTRA = {"\u4f60", "\u597d", " \u4e16", "\u754c", "\ud83c\udf0d"};  // ids 259..263
  private static final int VOCAB = 259 + EXTRA.length;
  // BOS, 你, 好, the bytes F0 9F 98 80 of 😀, " 世", 界, 🌍, then EOS.
  private static final int[] CHAIN = {1, 259, 260, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80, 261, 262, 263, 2};
  private static final int DIM = 16;
  private static final int HIDDEN = 16;
  private static final int HEADS = 2;
  private static final int SEQ = 32;

  private ChainModel() {}

  /** Writes chain.bin and tokenizer.bin into `dir`; returns the model's path. */
  static File write(File dir) throws IOException {
    writeTokenizer(new File(dir, "tokenizer.bin"));
    File model = new File(dir, "chain.bin");
    int d = DIM;
    int v = VOCAB;
    int headDim = d / HEADS;
    int floats = v * d + (d + 4 * d * d + d + 3 * HIDDEN * d) + d + SEQ * headDim + v * d;
    ByteBuffer b = ByteBuffer.allocate(28 + 4 * floats).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(d).putInt(HIDDEN).putInt(1).putInt(HEADS).putInt(HEADS).putInt(-v).putInt(SEQ);  // -v: unshared classifier
    float[] embedding = new float[v * d];
    float[] classifier = new float[v * d];
    for (int j = 0; j + 1 < CHAIN.length; ++j) {
      embedding[CHAIN[j] * d + j] = 1f;
      classifier[CHAIN[j + 1] * d + j] = 1f;
    }
    put(b, embedding);
    put(b, ones(d));                     // attention norm
    put(b, new float[4 * d * d]);        // wq, wk, wv, wo
    put(b, ones(d));                     // ffn norm
    put(b, new float[3 * HIDDEN * d]);   // w1, w2, w3
    put(b, ones(d));                     // final norm
    put(b, new float[SEQ * headDim]);    // llama2.c's legacy freq_cis tables (unused)
    put(b, classifier);
    try (FileOutputStream out = new FileOutputStream(model)) {
      out.write(b.array());
    }
    return model;
  }

  private static void writeTokenizer(File file) throws IOException {
    byte[][] pieces = new byte[VOCAB][];
    pieces[0] = "<unk>".getBytes(StandardCharsets.UTF_8);
    pieces[1] = "<s>".getBytes(StandardCharsets.UTF_8);
    pieces[2] = "</s>".getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i < 256; ++i) {
      pieces[3 + i] = String.format("<0x%02X>", i).getBytes(StandardCharsets.UTF_8);
    }
    for (int i = 0; i < EXTRA.length; ++i) {
      pieces[259 + i] = EXTRA[i].getBytes(StandardCharsets.UTF_8);
    }
    int max = 0;
    int size = 4;
    for (byte[] p : pieces) {
      max = Math.max(max, p.length);
      size += 8 + p.length;
    }
    ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(max);
    for (byte[] p : pieces) {
      b.putFloat(0f).putInt(p.length).put(p);
    }
    try (FileOutputStream out = new FileOutputStream(file)) {
      out.write(b.array());
    }
  }

  private static float[] ones(int n) {
    float[] a = new float[n];
    java.util.Arrays.fill(a, 1f);
    return a;
  }

  private static void put(ByteBuffer b, float[] a) {
    for (float f : a) {
      b.putFloat(f);
    }
  }
}
