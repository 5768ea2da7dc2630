package ai.kiln;

/** kiln_kv_type: the KV cache's element type. */
public enum KvType {
  F32, F16
}
