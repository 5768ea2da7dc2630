package ai.kiln;

/** kiln_model_info_t. */
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

  ModelInfo(String[] names, long[] n) {
    arch = names[0];
    kind = names[1];
    scheme = names[2];
    nParams = n[0];
    vocabSize = (int) n[1];
    nLayers = (int) n[2];
    dim = (int) n[3];
    nHeads = (int) n[4];
    nKvHeads = (int) n[5];
    headDim = (int) n[6];
    nCtxMax = (int) n[7];
    bosId = (int) n[8];
    eosId = (int) n[9];
    hasChatTemplate = n[10] != 0;
    weightBytes = n[11];
    fileBytes = n[12];
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
