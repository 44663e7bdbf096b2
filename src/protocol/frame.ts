/**
 * The agent daemon's transport framing: each frame is a u32 big-endian payload length followed by
 * that many bytes of protobuf. A frame longer than {@link MAX_FRAME} (16 MiB, the daemon's own
 * cap) is a protocol error that ends the connection: nothing after it can be trusted to be
 * aligned on a frame boundary.
 */

/** Largest payload of one frame, bytes (16 MiB). */
export const MAX_FRAME = 16 * 1024 * 1024;

/** A frame that breaks the framing rules (too long). */
export class FrameError extends Error {
  override name = 'FrameError';
}

/**
 * Frame one payload.
 * @throws FrameError when the payload is over {@link MAX_FRAME}.
 */
export function frame(payload: Uint8Array): Buffer {
  if (payload.length > MAX_FRAME) {
    throw new FrameError(`frame of ${payload.length} bytes is over the limit of ${MAX_FRAME}`);
  }
  const out = Buffer.allocUnsafe(4 + payload.length);
  out.writeUInt32BE(payload.length, 0);
  out.set(payload, 4);
  return out;
}

/** First capacity of a frame's assembly buffer, bytes; it doubles as the frame's bytes arrive. */
const FIRST_CAPACITY = 64 * 1024;

/**
 * Incremental splitter of a byte stream into frames. Feed it chunks as they arrive; it returns
 * the payloads completed so far and keeps the remainder.
 *
 * Each byte is copied at most once (plus the amortised copies of a doubling buffer): a frame that
 * arrives whole inside one chunk is returned as a view of it; one that spans chunks is assembled
 * in a buffer that grows with what has arrived, never with what the prefix announced, so a
 * prefix alone costs no memory. Joining all chunks received so far on every chunk, as this reader
 * once did, let a peer that sent a 16 MiB frame in 4 KiB pieces make it copy some 32 GiB (half a
 * minute of one core) for 16 MiB on the wire.
 */
export class FrameReader {
  private readonly head = Buffer.alloc(4);
  private headFilled = 0;
  /** payload length of the frame being received once its prefix is complete; -1 before */
  private want = -1;
  private body: Buffer | null = null;
  private filled = 0;

  /**
   * Append `chunk` and return every complete payload, in order.
   * @throws FrameError when a length prefix announces more than {@link MAX_FRAME} bytes (the
   *   reader is then unusable: the caller must drop the connection).
   */
  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    let off = 0;
    for (;;) {
      if (this.want < 0) {
        if (off === chunk.length) break;
        const n = Math.min(4 - this.headFilled, chunk.length - off);
        this.head.set(chunk.subarray(off, off + n), this.headFilled);
        this.headFilled += n;
        off += n;
        if (this.headFilled < 4) break;
        const len = this.head.readUInt32BE(0);
        if (len > MAX_FRAME) {
          throw new FrameError(`peer announced a frame of ${len} bytes; the limit is ${MAX_FRAME}`);
        }
        this.want = len;
      }
      const n = Math.min(this.want - this.filled, chunk.length - off);
      if (this.filled === 0 && n === this.want) {
        out.push(chunk.subarray(off, off + n));
      } else {
        if (n === 0) break;
        this.reserve(this.filled + n);
        this.body!.set(chunk.subarray(off, off + n), this.filled);
        this.filled += n;
        if (this.filled < this.want) break;
        out.push(new Uint8Array(this.body!.buffer, this.body!.byteOffset, this.want));
      }
      off += n;
      this.want = -1;
      this.headFilled = 0;
      this.body = null;
      this.filled = 0;
    }
    return out;
  }

  /** Grow the assembly buffer to hold at least `need` bytes (at most the frame's length). */
  private reserve(need: number): void {
    const cap = this.body?.length ?? 0;
    if (need <= cap) return;
    const next = Buffer.allocUnsafe(Math.min(this.want, Math.max(need, cap * 2, FIRST_CAPACITY)));
    if (this.body) this.body.copy(next, 0, 0, this.filled);
    this.body = next;
  }

  /** Bytes received that do not yet form a complete frame. */
  get pending(): number {
    return this.want < 0 ? this.headFilled : 4 + this.filled;
  }
}
