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

/**
 * Incremental splitter of a byte stream into frames. Feed it chunks as they arrive; it returns
 * the payloads completed so far and keeps the remainder.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  private size = 0;

  /**
   * Append `chunk` and return every complete payload, in order.
   * @throws FrameError when a length prefix announces more than {@link MAX_FRAME} bytes (the
   *   reader is then unusable: the caller must drop the connection).
   */
  push(chunk: Uint8Array): Uint8Array[] {
    this.chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
    this.size += chunk.length;
    const out: Uint8Array[] = [];
    for (;;) {
      if (this.size < 4) break;
      const head = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
      this.chunks = [head];
      const len = head.readUInt32BE(0);
      if (len > MAX_FRAME) {
        throw new FrameError(`peer announced a frame of ${len} bytes; the limit is ${MAX_FRAME}`);
      }
      if (this.size < 4 + len) break;
      out.push(new Uint8Array(head.subarray(4, 4 + len)));
      const rest = head.subarray(4 + len);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.size = rest.length;
    }
    return out;
  }

  /** Bytes received that do not yet form a complete frame. */
  get pending(): number {
    return this.size;
  }
}
