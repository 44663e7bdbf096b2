/**
 * A client of the agent daemon over a Unix domain socket or TCP, speaking length-framed protobuf
 * (./frame.ts): it sends an encoded ClientMessage and collects the encoded ServerMessage(s) that
 * answer it.
 *
 * The protocol carries no request ids: replies come back in request order. So the client keeps
 * one connection and runs one request at a time on it (later calls wait their turn). A call
 * that times out destroys the connection, because a late reply would otherwise be taken as the
 * answer to the next request; the next call connects afresh. Reconnection is lazy: every call
 * finds a live connection or makes one, so a daemon that restarts is picked up by the next call,
 * and one that is down gives "the protocol is not connected yet" at once instead of a hang.
 */
import * as net from 'node:net';
import { FrameReader, MAX_FRAME, frame } from './frame.js';
import { decodeServer } from './schema.js';

/** Where the agent daemon listens: a Unix socket path or a TCP host and port. */
export type Endpoint = { path: string } | { host: string; port: number };

/**
 * Parse an endpoint: `unix:/run/x.sock` or an absolute path (Unix socket), `tcp://host:port` or
 * `host:port` (TCP; IPv6 as `[::1]:port`; port 0 only makes sense to listen on).
 * @throws Error naming the text when it is neither.
 */
export function parseEndpoint(text: string): Endpoint {
  const t = text.trim();
  if (t.startsWith('unix:')) return { path: t.slice(5).replace(/^\/\/(?=\/)/, '') };
  if (t.startsWith('/')) return { path: t };
  const m = /^(?:tcp:\/\/)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/.exec(t);
  if (m && Number(m[2]) < 65536) {
    return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) };
  }
  throw new Error(
    `agent daemon endpoint ${JSON.stringify(text)} is neither a Unix socket (unix:/path or /path) nor host:port`,
  );
}

/** The endpoint as text, for messages. */
export function endpointText(e: Endpoint): string {
  return 'path' in e ? `unix:${e.path}` : `${e.host.includes(':') ? `[${e.host}]` : e.host}:${e.port}`;
}

/** No daemon is reachable (connect refused, no such socket, connect timed out). */
export class NotConnectedError extends Error {
  override name = 'NotConnectedError';
}

/** The daemon did not finish answering within the call's timeout. */
export class CallTimeoutError extends Error {
  override name = 'CallTimeoutError';
}

/** Options of one {@link AgentClient.call}. */
export interface CallOptions {
  /** wall-clock budget of the call, connect included, ms */
  timeoutMs: number;
  /** the request is a stream: collect replies until a StreamEvent `end` (or an error) */
  stream?: boolean;
  /** most replies collected for a stream before the call fails (default 10,000) */
  maxReplies?: number;
  /**
   * most payload bytes collected for one answer, all of a stream's replies together, before the
   * call fails (default {@link MAX_FRAME}, 16 MiB: a stream is folded into one answer, which a
   * single frame could carry). Without it a daemon could stream 10,000 frames of 16 MiB each
   * into the host's memory within one call's timeout.
   */
  maxBytes?: number;
}

interface Conn {
  socket: net.Socket;
  reader: FrameReader;
  /** receives frames while a call is running; null between calls */
  onFrame: ((payload: Uint8Array) => void) | null;
  onClose: ((why: string) => void) | null;
  closed: boolean;
}

/** True when a ServerMessage ends the answer to its request (see {@link CallOptions.stream}). */
function ends(payload: Uint8Array, stream: boolean): boolean {
  if (!stream) return true;
  try {
    const m = decodeServer(payload);
    if (m.msg === 'error') return true;
    return m.msg === 'stream' && (m.stream as { event?: string } | undefined)?.event === 'end';
  } catch {
    return true; // an undecodable reply ends the call; the caller reports it
  }
}

/** A reconnecting client of one agent daemon endpoint (see the module comment). */
export class AgentClient {
  private conn: Conn | null = null;
  private turn: Promise<unknown> = Promise.resolve();

  /**
   * @param endpoint where the daemon listens
   * @param connectTimeoutMs longest wait for a connection before "not connected" (default 2,000)
   */
  constructor(
    readonly endpoint: Endpoint,
    private readonly connectTimeoutMs = 2_000,
  ) {}

  /**
   * Send one encoded ClientMessage and resolve with the encoded ServerMessage(s) answering it:
   * one for a request/response message, the stream's events through `end` for a stream.
   * @throws NotConnectedError when no daemon is reachable; CallTimeoutError when the answer is
   *   not complete within `timeoutMs` (the connection is then dropped); Error when the daemon
   *   closes the connection mid-answer or breaks the framing.
   */
  call(request: Uint8Array, options: CallOptions): Promise<Uint8Array[]> {
    const run = this.turn.then(
      () => this.callNow(request, options),
      () => this.callNow(request, options),
    );
    this.turn = run.catch(() => undefined);
    return run;
  }

  /** Drop the connection (a later call reconnects). */
  close(): void {
    if (this.conn) {
      this.conn.closed = true;
      this.conn.socket.destroy();
      this.conn = null;
    }
  }

  /** Whether a connection is open right now. */
  get connected(): boolean {
    return this.conn !== null && !this.conn.closed;
  }

  private async callNow(request: Uint8Array, options: CallOptions): Promise<Uint8Array[]> {
    const deadline = Date.now() + options.timeoutMs;
    const conn = await this.connection(Math.min(this.connectTimeoutMs, options.timeoutMs));
    const framed = frame(request);
    const maxReplies = options.maxReplies ?? 10_000;
    const maxBytes = options.maxBytes ?? MAX_FRAME;
    return new Promise<Uint8Array[]>((resolve, reject) => {
      const replies: Uint8Array[] = [];
      let bytes = 0;
      // eslint-disable-next-line prefer-const -- assigned once below, read by finish()
      let timer: NodeJS.Timeout | undefined;
      const finish = (err: Error | null) => {
        clearTimeout(timer);
        conn.onFrame = null;
        conn.onClose = null;
        if (err) reject(err);
        else resolve(replies);
      };
      conn.onFrame = (payload) => {
        replies.push(payload);
        bytes += payload.length;
        if (bytes > maxBytes) {
          this.drop(conn);
          finish(
            new Error(
              `the agent daemon at ${endpointText(this.endpoint)} sent an answer of more than ${maxBytes} bytes`,
            ),
          );
        } else if (ends(payload, options.stream ?? false)) finish(null);
        else if (replies.length >= maxReplies) {
          this.drop(conn);
          finish(new Error(`the stream sent more than ${maxReplies} events`));
        }
      };
      conn.onClose = (why) => finish(new Error(`the agent daemon at ${endpointText(this.endpoint)} ${why}`));
      timer = setTimeout(
        () => {
          this.drop(conn);
          finish(
            new CallTimeoutError(
              `the agent daemon at ${endpointText(this.endpoint)} did not answer within ${options.timeoutMs} ms`,
            ),
          );
        },
        Math.max(0, deadline - Date.now()),
      );
      conn.socket.write(framed);
    });
  }

  private drop(conn: Conn): void {
    conn.closed = true;
    conn.socket.destroy();
    if (this.conn === conn) this.conn = null;
  }

  private connection(timeoutMs: number): Promise<Conn> {
    if (this.conn && !this.conn.closed) return Promise.resolve(this.conn);
    const where = endpointText(this.endpoint);
    return new Promise<Conn>((resolve, reject) => {
      const socket =
        'path' in this.endpoint
          ? net.connect({ path: this.endpoint.path })
          : net.connect({ host: this.endpoint.host, port: this.endpoint.port });
      socket.setNoDelay?.(true);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(
          new NotConnectedError(
            `the protocol is not connected yet: ${where} did not accept within ${timeoutMs} ms`,
          ),
        );
      }, timeoutMs);
      socket.once('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(new NotConnectedError(`the protocol is not connected yet: ${where}: ${e.code ?? e.message}`));
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        const conn: Conn = { socket, reader: new FrameReader(), onFrame: null, onClose: null, closed: false };
        socket.on('data', (chunk: Buffer) => {
          let frames: Uint8Array[];
          try {
            frames = conn.reader.push(chunk);
          } catch (e) {
            this.drop(conn);
            conn.onClose?.(`broke the framing: ${(e as Error).message}`);
            return;
          }
          for (const f of frames) {
            if (conn.onFrame) conn.onFrame(f);
            else {
              // an answer nobody asked for: the stream is out of step, start over
              this.drop(conn);
              return;
            }
          }
        });
        socket.on('error', () => undefined); // 'close' follows and reports
        socket.on('close', () => {
          conn.closed = true;
          if (this.conn === conn) this.conn = null;
          conn.onClose?.('closed the connection before answering');
        });
        this.conn = conn;
        resolve(conn);
      });
    });
  }
}
