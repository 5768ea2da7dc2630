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
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Native memory and JNI references over many cycles (run under -Xcheck:jni by .ci/java.sh, which
 * fails on any JNI warning): runtime, model and session created, used (blocking and async) and
 * closed, again and again (each cycle's runtime starts its job threads, attached to the JVM at their
 * first callback and detached when they end); the resident set after the warm-up and at the end
 * within 5 MiB.
 */
final class LeakCheck {
  private LeakCheck() {}

  static long rssKiB() throws IOException {
    for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
      if (line.startsWith("VmRSS:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    }
    throw new IOException("no VmRSS in /proc/self/status");
  }

  /**
   * `cycles` measured cycles after 300 of warm-up (the JIT and the allocator's pools settle); the
   * resident set is sampled every 50 cycles after a collection, and the mean of the last quarter of
   * samples must be within 5 MiB of the mean of the first quarter (single samples swing by a few MiB
   * as the JVM's own pools come and go; a leak is a trend).
   */
  static void run(String model, int cycles) throws Exception {
    int warmup = 300;
    java.util.List<Long> samples = new java.util.ArrayList<>();
    for (int i = 0; i < warmup + cycles; ++i) {
      if (i >= warmup && (i - warmup) % 50 == 0) {
        System.gc();
        samples.add(rssKiB());
      }
      cycle(model, i);
    }
    System.gc();
    Thread.sleep(200);  // the Cleaner's thread frees what the collector found
    samples.add(rssKiB());
    int q = Math.max(1, samples.size() / 4);
    long first = 0;
    long last = 0;
    for (int i = 0; i < q; ++i) {
      first += samples.get(i);
      last += samples.get(samples.size() - 1 - i);
    }
    first /= q;
    last /= q;
    System.out.printf("leak check: %d cycles after %d of warm-up; RSS samples (KiB) %s; first quarter %d, last %d (%+d KiB)%n",
        cycles, warmup, samples, first, last, last - first);
    JavaTests.check(Math.abs(last - first) <= 5 * 1024, "RSS moved " + (last - first) + " KiB");
  }

  private static void cycle(String model, int i) throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel m = KilnModel.load(rt, model, null);
        KilnSession s = m.newSession(new SessionOptions().temperature(0.8f).seed(i).nCtx(64))) {
      String a = s.generate("Once upon a time", new GenerateOptions().maxTokens(8));
      CountDownLatch done = new CountDownLatch(1);
      s.generateAsync("Once upon a time" + a, new GenerateOptions().maxTokens(8), new TokenListener() {
        @Override
        public void onToken(String text) {}

        @Override
        public void onDone(GenerationStats stats) {
          done.countDown();
        }

        @Override
        public void onError(KilnException e) {
          done.countDown();
        }
      });
      JavaTests.check(done.await(30, TimeUnit.SECONDS), "async call ended");
      // The token level: a decode, its logits (a float[] per call) and a sample.
      s.decode(m.tokenize(" The end", false, false));
      JavaTests.check(s.logits().length == 512 && s.sample() >= 0, "token level");
    }
    // Every 10th cycle, objects are left unclosed for the Cleaner to free.
    if (i % 10 == 0) {
      KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
      KilnModel m = KilnModel.load(rt, model, null);
      m.newSession(null).generate("Once", new GenerateOptions().maxTokens(2));
    }
  }

  /**
   * 10,000 tokens through one session's async calls, on the runtime's job threads (attached once and
   * never returning to Java): local references stay bounded.
   */
  static void longGeneration(String model, int tokens) throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel m = KilnModel.load(rt, model, null);
        KilnSession s = m.newSession(new SessionOptions().temperature(1.0f).seed(5).nCtx(512))) {
      AtomicInteger pieces = new AtomicInteger();
      int total = 0;
      while (total < tokens) {
        CountDownLatch done = new CountDownLatch(1);
        int[] generated = new int[1];
        s.reset();
        s.generateAsync("", new GenerateOptions().maxTokens(500), new TokenListener() {
          @Override
          public void onToken(String text) {
            pieces.incrementAndGet();
          }

          @Override
          public void onDone(GenerationStats stats) {
            generated[0] = stats.generatedTokens;
            done.countDown();
          }

          @Override
          public void onError(KilnException e) {
            done.countDown();
          }
        });
        JavaTests.check(done.await(60, TimeUnit.SECONDS), "ended");
        JavaTests.check(generated[0] > 0, "generated nothing");
        total += generated[0];
      }
      System.out.printf("long generation: %d tokens, %d pieces on kiln's job threads%n", total, pieces.get());
    }
  }
}
