package ai.kiln.test;

import ai.kiln.GenerateOptions;
import ai.kiln.GenerationStats;
import ai.kiln.KilnException;
import ai.kiln.KilnModel;
import ai.kiln.KilnRuntime;
import ai.kiln.KilnSession;
import ai.kiln.RuntimeOptions;
import ai.kiln.SessionOptions;
import ai.kiln.TokenListener;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java side of the overhead measurement (bindings/java/src/bench/overhead.sh): the generation of
 * decode_bench.c, streamed through generateAsync (a JNI upcall and a String per piece) or blocking.
 *   DecodeBench MODEL THREADS TOKENS REPS async|blocking|pairs
 * One line per run: "java-async decode_tok_s D wall_ms W tokens N". `pairs`: per rep a streamed run
 * then a blocking one in the same process; their difference is what the per-token upcall costs (the
 * blocking call crosses JNI once per call, not per token).
 */
public final class DecodeBench {
  public static void main(String[] args) throws Exception {
    String path = args[0];
    int threads = Integer.parseInt(args[1]);
    int tokens = Integer.parseInt(args[2]);
    int reps = Integer.parseInt(args[3]);
    String mode = args[4];
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(threads));
        KilnModel model = KilnModel.load(rt, path, null)) {
      GenerateOptions go = new GenerateOptions().maxTokens(tokens);
      for (int rep = 0; rep < reps; ++rep) {
        if (mode.equals("pairs")) {
          run(model, go, true);
          run(model, go, false);
        } else {
          run(model, go, mode.equals("async"));
        }
      }
    }
  }

  private static void run(KilnModel model, GenerateOptions go, boolean async) throws InterruptedException {
    try (KilnSession s = model.newSession(new SessionOptions().temperature(0f).nCtx(512))) {
      long t0 = System.nanoTime();
      GenerationStats stats;
      if (async) {
        AtomicLong chars = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        GenerationStats[] out = new GenerationStats[1];
        s.generateAsync("Once upon a time", go, new TokenListener() {
          @Override
          public void onToken(String text) {
            chars.addAndGet(text.length());
          }

          @Override
          public void onDone(GenerationStats st) {
            out[0] = st;
            done.countDown();
          }

          @Override
          public void onError(KilnException e) {
            done.countDown();
          }
        });
        done.await();
        stats = out[0];
      } else {
        s.generate("Once upon a time", go);
        stats = s.lastStats();
      }
      System.out.printf("java-%s decode_tok_s %.3f wall_ms %.1f tokens %d%n", async ? "async" : "blocking",
          stats.decodeTokensPerSecond, (System.nanoTime() - t0) / 1e6, stats.generatedTokens);
    }
  }
}
