/**
 * Read an input file whole, bounded by what it really is: only a regular file is read (a FIFO
 * would block for ever, /dev/zero never ends, a directory is not input), and never more bytes
 * than its size when opened, up to a cap.
 */
import * as fs from 'node:fs';

/** Why a file could not be read; `message` names the path, the reason and the fix. */
export class InputFileError extends Error {
  override name = 'InputFileError';
  constructor(
    readonly path: string,
    readonly reason: string,
    fix: string,
  ) {
    super(`${path}: ${reason}${fix ? `; ${fix}` : ''}`);
  }
}

/** Largest input file read by default: 1 GiB (no harness image can be larger, see src/elf). */
export const MAX_INPUT_BYTES = 1 << 30;

function kindOf(st: fs.Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * Read the regular file at `path`. Opened with O_NONBLOCK so that a FIFO cannot block the open;
 * the fstat of what was opened decides. Reads exactly the size fstat gives (a file growing
 * meanwhile is read as it was).
 * @param maxBytes refuse a larger file (default {@link MAX_INPUT_BYTES})
 * @throws InputFileError when the file is missing, unreadable, not a regular file or too large.
 */
export function readRegularFile(path: string, maxBytes = MAX_INPUT_BYTES): Uint8Array {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'is a directory'
            : code === 'ENXIO'
              ? 'is a socket or a device without a reader'
              : (e as Error).message;
    throw new InputFileError(path, code && why !== (e as Error).message ? `${why} (${code})` : why, '');
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new InputFileError(path, `is ${kindOf(st)}`, 'name a regular file');
    if (st.size > maxBytes) {
      throw new InputFileError(
        path,
        `is ${st.size} bytes, over the limit of ${maxBytes}`,
        'is it really a harness?',
      );
    }
    const buf = new Uint8Array(st.size);
    let got = 0;
    while (got < buf.length) {
      const n = fs.readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return got === buf.length ? buf : buf.subarray(0, got);
  } finally {
    fs.closeSync(fd);
  }
}
