package ai.kiln;

/** kiln_perf_mode, in its order. */
public enum PerfMode {
  BALANCED, BURST, SUSTAINED, POWER_SAVER
}
