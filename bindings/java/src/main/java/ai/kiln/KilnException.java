package ai.kiln;

/**
 * Every failure of the binding: the C API's kiln_status (as a {@link KilnStatus}) and its
 * kiln_last_error() message. The message starts with the status's name, "KILN_E_BUDGET: ...",
 * wherever it is printed; {@link #detail()} is the message alone.
 */
public class KilnException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final KilnStatus status;
  private final int code;
  private final String detail;

  public KilnException(KilnStatus status, String message) {
    this(status, status != null ? status.value() : KilnStatus.UNKNOWN.value(), message, null);
  }

  KilnException(KilnStatus status, String message, Throwable cause) {
    this(status, status.value(), message, cause);
  }

  /** From a C value (JNI, a listener's finish): mapped by value. */
  KilnException(int code, String message) {
    this(KilnStatus.of(code), code, message, null);
  }

  private KilnException(KilnStatus status, int code, String message, Throwable cause) {
    super(name(status, code) + ": " + message, cause);
    this.status = status != null ? status : KilnStatus.UNKNOWN;
    this.code = code;
    this.detail = message;
  }

  private static String name(KilnStatus status, int code) {
    return status == null || status == KilnStatus.UNKNOWN ? "KILN_E_UNKNOWN(" + code + ")" : status.cName();
  }

  /** The kiln_status. */
  public KilnStatus status() {
    return status;
  }

  /** The kiln_status's C value (for UNKNOWN, the number the library gave). */
  public int code() {
    return code;
  }

  /** "KILN_E_IO", as kiln_status_name says it. */
  public String statusName() {
    return name(status, code);
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
