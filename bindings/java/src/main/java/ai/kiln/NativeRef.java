package ai.kiln;

import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.LongConsumer;

/**
 * A native handle's life: calls hold it shared, close() takes it exclusively, frees it once and
 * zeroes it, so a closed object used again throws KilnException instead of passing a freed pointer.
 * Also the Cleaner's action (it must not reach the object it cleans).
 */
final class NativeRef implements Runnable {
  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private final LongConsumer free;
  private final String what;
  private long handle;

  NativeRef(long handle, LongConsumer free, String what) {
    this.handle = handle;
    this.free = free;
    this.what = what;
  }

  /**
   * The handle, held until {@link #release()}; throws if closed or being closed. Never waits: a
   * call from a listener while another thread closes the object must fail, not wait for a close
   * that waits for that listener.
   */
  long acquire() {
    if (!lock.readLock().tryLock()) {
      throw closed();  // the write lock is held: close() runs on another thread
    }
    if (handle == 0) {
      lock.readLock().unlock();
      throw closed();
    }
    return handle;
  }

  private KilnException closed() {
    return new KilnException(KilnStatus.INVALID_ARGUMENT, what + " is closed");
  }

  void release() {
    lock.readLock().unlock();
  }

  /** Frees the handle (once); waits for the calls in progress on other threads. */
  @Override
  public void run() {
    if (lock.getReadHoldCount() > 0) {
      throw new KilnException(KilnStatus.REENTRANT, what + ": close() from inside one of its own calls");
    }
    lock.writeLock().lock();
    try {
      if (handle != 0) {
        long h = handle;
        handle = 0;
        free.accept(h);
      }
    } finally {
      lock.writeLock().unlock();
    }
  }
}
