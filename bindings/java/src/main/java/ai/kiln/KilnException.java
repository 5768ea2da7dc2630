package ai.kiln;

/**
 * Every failure of the binding: the C API's kiln_status and its kiln_last_error() message. The
 * message starts with the status's name, "KILN_E_BUDGET: ...", wherever it is printed.
 */
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
  private final String detail;

  public KilnException(int status, String message) {
    super(name(status) + ": " + message);
    this.status = status;
    this.detail = message;
  }

  KilnException(int status, String message, Throwable cause) {
    super(name(status) + ": " + message, cause);
    this.status = status;
    this.detail = message;
  }

  private static String name(int status) {
    return status >= 0 && status < NAMES.length ? NAMES[status] : "KILN_E_UNKNOWN(" + status + ")";
  }

  /** The kiln_status value. */
  public int status() {
    return status;
  }

  /** "KILN_E_IO", as kiln_status_name says it. */
  public String statusName() {
    return name(status);
  }

  /** The message without the status's name: kiln_last_error()'s text, or the binding's own. */
  public String detail() {
    return detail;
  }

  /** "KilnException: KILN_E_BUDGET: ..." */
  @Override
  public String toString() {
    return "KilnException: " + getMessage();
  }
}
