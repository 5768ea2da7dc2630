package ai.kiln;

/** kiln_model_info (kiln_model_info_get). */
public final class ModelInfo {
  public final String arch;
  public final String kind;
  public final String scheme;
  public final long nParams;
  public final int vocabSize;
  public final int nLayers;
  public final int dim;
  public final int nHeads;
  public final int nKvHeads;
  public final int headDim;
  public final int nCtxMax;
  public final int bosId;
  public final int eosId;
  public final boolean hasChatTemplate;
  public final long weightBytes;
  public final long fileBytes;

  /** Filled field by field by JNI (kiln_model_info_get), never read by position. */
  private ModelInfo() {
    arch = "";
    kind = "";
    scheme = "";
    nParams = 0;
    vocabSize = 0;
    nLayers = 0;
    dim = 0;
    nHeads = 0;
    nKvHeads = 0;
    headDim = 0;
    nCtxMax = 0;
    bosId = 0;
    eosId = 0;
    hasChatTemplate = false;
    weightBytes = 0;
    fileBytes = 0;
  }

  /** Every field, as a record prints them: "ModelInfo[arch=llama, kind=kiln, ...]". */
  @Override
  public String toString() {
    return "ModelInfo[arch=" + arch + ", kind=" + kind + ", scheme=" + scheme + ", nParams=" + nParams
        + ", vocabSize=" + vocabSize + ", nLayers=" + nLayers + ", dim=" + dim + ", nHeads=" + nHeads
        + ", nKvHeads=" + nKvHeads + ", headDim=" + headDim + ", nCtxMax=" + nCtxMax + ", bosId=" + bosId
        + ", eosId=" + eosId + ", hasChatTemplate=" + hasChatTemplate + ", weightBytes=" + weightBytes
        + ", fileBytes=" + fileBytes + "]";
  }
}
