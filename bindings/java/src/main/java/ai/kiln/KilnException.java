package ai.kiln;

/** Every failure of the binding: the C API's kiln_status and its kiln_last_error() message. */
public class KilnException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public static final int INVALID_ARGUMENT = 1;
  public static final int IO = 2;
  public static final int FORMAT = 3;
  public static final int UNSUPPORTED = 4;
  public static final int OUT_OF_MEMORY = 5;
  public static final int BUDGET = 6;
  public static final int CANCELLED = 7;
  public static final int CONTEXT_FULL = 8;
  public static final int REENTRANT = 9;
  public static final int NOT_FOUND = 10;
  public static final int INTERNAL = 11;

  // kiln_status_name's spellings, in kiln_status order.
  private static final String[] NAMES = {"KILN_OK", "KILN_E_INVALID_ARGUMENT", "KILN_E_IO", "KILN_E_FORMAT",
      "KILN_E_UNSUPPORTED", "KILN_E_OUT_OF_MEMORY", "KILN_E_BUDGET", "KILN_E_CANCELLED", "KILN_E_CONTEXT_FULL",
      "KILN_E_REENTRANT", "KILN_E_NOT_FOUND", "KILN_E_INTERNAL"};

  private final int status;

  public KilnException(int status, String message) {
    super(message);
    this.status = status;
  }

  KilnException(int status, String message, Throwable cause) {
    super(message, cause);
    this.status = status;
  }

  /** The kiln_status value. */
  public int status() {
    return status;
  }

  /** "KILN_E_IO", as kiln_status_name says it. */
  public String statusName() {
    return status >= 0 && status < NAMES.length ? NAMES[status] : "KILN_E_UNKNOWN(" + status + ")";
  }

  @Override
  public String toString() {
    return "KilnException: " + statusName() + ": " + getMessage();
  }
}
