/**
 * The CLI's standard output and error, written to file descriptors 1 and 2 with `fs.writeSync`
 * instead of through `process.stdout` and `process.stderr`.
 *
 * Why: a CLI tool call writes one result and exits, and Node makes its standard streams on first
 * use. For a pipe, what a caller capturing the output gives, that is a `net.Socket` over a libuv
 * pipe handle, its modules loaded on the way: ~2 ms of a ~50 ms call (measured: the first
 * `process.stdout` on a pipe 1.7-2.5 ms, the first write 0.3-0.6 ms; `writeSync` to the same fd
 * ~0.01 ms). The bytes and their order are the same: Node's streams write to files, pipes and
 * terminals synchronously on Linux too, when the fd takes the bytes at once.
 *
 * When it does not: an fd in non-blocking mode (a descriptor shared with a process that set
 * O_NONBLOCK, or one Node's own stream already made non-blocking) answers EAGAIN when the reader
 * is behind. The rest of that write and every later one then go through the process stream, which
 * queues and waits as Node always did ({@link SyncOutput.stream}). On Windows, where Node's
 * console stream converts the text for the console, the stream is used from the start.
 *
 * Errors: EBADF from a closed descriptor drops the output, as Node's stream for a closed
 * descriptor does; any other (EPIPE from a reader that stopped, ENOSPC from a full disk, EIO,
 * EBADF from an open descriptor that takes no writes) is
 * handed to {@link SyncOutput.onError} once, and later writes are dropped; so is a failure the
 * process stream reports once output goes through it.
 */
import { fstatSync, writeSync } from 'node:fs';

/** A standard stream written synchronously (see the module comment). */
export class SyncOutput {
  private fallback: NodeJS.WriteStream | null = null;
  private failed = false;
  /** called once with the first write error other than EAGAIN and EBADF; default: ignored */
  onError: (e: NodeJS.ErrnoException) => void = () => undefined;

  /**
   * @param fd 1 or 2
   * @param processStream the process's own stream for `fd` (a getter: Node makes it on first use)
   */
  constructor(
    private readonly fd: number,
    private readonly processStream: () => NodeJS.WriteStream,
  ) {
    if (process.platform === 'win32') this.useStream();
  }

  /**
   * Send this and every later write through the process stream. Its failures (a reader that went
   * away while bytes were queued: EPIPE) come as 'error' events, which would end the process with
   * an unhandled-error stack; they go to {@link onError} like a failed synchronous write.
   */
  private useStream(): NodeJS.WriteStream {
    const stream = this.processStream();
    stream.on('error', (err: NodeJS.ErrnoException) => this.fail(err));
    this.fallback = stream;
    return stream;
  }

  /**
   * The first failure: later writes are dropped. EBADF from a closed descriptor is not reported
   * (Node's stream for a closed fd 1 writes to nothing); from an open one that takes no writes
   * (opened read-only, `1</dev/null`) it is, as Node's stream reported it: the output was lost.
   */
  private fail(err: NodeJS.ErrnoException): void {
    if (this.failed) return;
    this.failed = true;
    if (err.code !== 'EBADF' || isOpen(this.fd)) this.onError(err);
  }

  /**
   * The process stream once output goes through it (after EAGAIN, or on Windows), else null: the
   * caller then knows that nothing is buffered.
   */
  get stream(): NodeJS.WriteStream | null {
    return this.fallback;
  }

  /** Write `data` (a string as UTF-8) in full, or hand the rest to the process stream. */
  write(data: string | Uint8Array): void {
    if (this.failed) return;
    if (this.fallback !== null) {
      this.fallback.write(data);
      return;
    }
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let at = 0;
    try {
      while (at < bytes.length) at += writeSync(this.fd, bytes, at, bytes.length - at);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code === 'EAGAIN') {
        this.useStream().write(bytes.subarray(at));
        return;
      }
      this.fail(err);
    }
  }
}

/** Whether `fd` is an open descriptor (fstat succeeds on it). */
function isOpen(fd: number): boolean {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
}

/** The process's standard output (fd 1). */
export const stdout = new SyncOutput(1, () => process.stdout);
/** The process's standard error (fd 2). */
export const stderr = new SyncOutput(2, () => process.stderr);
