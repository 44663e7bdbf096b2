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
 * What {@link readBoundedFile} found at a path: the bytes of a regular file, or why none were read:
 * `open` (the open failed, with its error), `type` (not a regular file), `size` (a regular file
 * over the bound); the last two with the fstat of what was opened.
 */
export type BoundedRead =
  | { bytes: Uint8Array }
  | { refused: 'open'; error: NodeJS.ErrnoException }
  | { refused: 'type' | 'size'; stats: fs.Stats };

/**
 * Read a file through one descriptor: open it read-only with O_NONBLOCK (a FIFO then opens at once
 * and is refused by its type, instead of waiting for a writer for ever) and O_NOCTTY (a terminal
 * never becomes the process's controlling terminal), plus `extraFlags`; fstat what was opened;
 * read it only when it is a regular file of at most `maxBytes`, exactly the size fstat gives (a
 * file growing meanwhile is read as it was; one shortened meanwhile yields the bytes read); close.
 * The same system calls as readFileSync, which instead waits for ever on a FIFO and reads a
 * device such as /dev/zero without end. Flags a platform lacks count as 0.
 * @param extraFlags more open flags, e.g. O_NOFOLLOW (the cache's entries)
 * @throws what reading an opened file throws (an I/O error); a failed open is a `refused: 'open'`
 */
export function readBoundedFile(path: string, maxBytes: number, extraFlags = 0): BoundedRead {
  const { O_RDONLY, O_NONBLOCK, O_NOCTTY } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(path, O_RDONLY | (O_NONBLOCK ?? 0) | (O_NOCTTY ?? 0) | extraFlags);
  } catch (e) {
    return { refused: 'open', error: e as NodeJS.ErrnoException };
  }
  try {
    const stats = fs.fstatSync(fd);
    if (!stats.isFile()) return { refused: 'type', stats };
    if (stats.size > maxBytes) return { refused: 'size', stats };
    // not zero-filled first: every byte returned is one read (a shortened file's bytes are copied
    // out, so no view reaches memory the read did not write); a plain Uint8Array over it, as
    // Buffer's subarray constructs a Buffer through JavaScript (the image's segments are views)
    const buf = new Uint8Array(Buffer.allocUnsafeSlow(stats.size).buffer, 0, stats.size);
    let got = 0;
    while (got < buf.length) {
      const n = fs.readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return { bytes: got === buf.length ? buf : buf.slice(0, got) };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Read the regular file at `path` ({@link readBoundedFile}), explaining a refusal.
 * @param maxBytes refuse a larger file (default {@link MAX_INPUT_BYTES})
 * @throws InputFileError when the file is missing, unreadable, not a regular file or too large.
 */
export function readRegularFile(path: string, maxBytes = MAX_INPUT_BYTES): Uint8Array {
  const r = readBoundedFile(path, maxBytes);
  if ('bytes' in r) return r.bytes;
  throw refusal(path, r, maxBytes);
}

/**
 * The error that explains why {@link readRegularFile} read nothing. Apart from it because V8
 * compiles a function whole on its first call: a warm compile reads its ELF through
 * readRegularFile and never comes here.
 */
function refusal(
  path: string,
  r: Exclude<BoundedRead, { bytes: Uint8Array }>,
  maxBytes: number,
): InputFileError {
  if (r.refused === 'open') {
    const e = r.error;
    const code = e.code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'is a directory'
            : code === 'ENXIO'
              ? 'is a socket or a device without a reader'
              : e.message;
    return new InputFileError(path, code && why !== e.message ? `${why} (${code})` : why, '');
  }
  if (r.refused === 'type') return new InputFileError(path, `is ${kindOf(r.stats)}`, 'name a regular file');
  return new InputFileError(
    path,
    `is ${r.stats.size} bytes, over the limit of ${maxBytes}`,
    'is it really a harness?',
  );
}
