// A TCP proxy on loopback in front of PostgreSQL that reads the frontend/backend protocol and, once
// armed, cuts the connection that sends a statement containing a given text: either before the
// statement reaches the server ('before': it never runs) or after the server finished it and is
// idle again ('after': it ran and committed, but its answer never reaches the client, as when a
// connection drops between a commit and its reply). Everything else passes through unchanged.
import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';

/** Where a cut falls relative to the statement that triggers it. */
export type CutMode = 'before' | 'after';

/** A running proxy. */
export interface CutProxy {
  /** the proxy's port on 127.0.0.1 */
  port: number;
  /**
   * Cut the next connection that sends a statement (Parse or simple Query message) containing
   * `text`, once. @returns a promise resolved when the cut happened
   */
  arm(text: string, mode: CutMode): Promise<void>;
  /** close the proxy and every connection through it */
  close(): void;
}

/**
 * Splits a byte stream into protocol messages: `typed` messages are a type byte and a 32-bit
 * length (counting itself); the client's first message (startup or SSL request) has no type byte.
 */
class Framer {
  private buf = Buffer.alloc(0);
  constructor(private untypedFirst: boolean) {}

  /** Feed `chunk`; @returns the complete messages it ends, each as [type (0 untyped), bytes] */
  push(chunk: Buffer): [number, Buffer][] {
    this.buf = Buffer.concat([this.buf, chunk]);
    const out: [number, Buffer][] = [];
    for (;;) {
      const head = this.untypedFirst ? 0 : 1;
      if (this.buf.length < head + 4) break;
      const len = this.buf.readInt32BE(head);
      if (this.buf.length < head + len) break;
      out.push([head === 0 ? 0 : this.buf[0]!, this.buf.subarray(0, head + len)]);
      this.buf = this.buf.subarray(head + len);
      // an SSL or GSS request (length 8) is followed by another untyped startup message
      if (this.untypedFirst && len !== 8) this.untypedFirst = false;
    }
    return out;
  }
}

/** Start a proxy to PostgreSQL on 127.0.0.1:`port`. */
export async function cutProxy(port: number): Promise<CutProxy> {
  const sockets = new Set<Socket>();
  let armed: { text: string; mode: CutMode; done: () => void } | null = null;
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    const fromClient = new Framer(true);
    const fromServer = new Framer(false);
    // set once this connection sent the triggering statement in mode 'after': nothing more goes
    // back to the client, and the connection is cut when the server is idle (ReadyForQuery 'I')
    let swallow: (() => void) | null = null;
    client.on('data', (chunk: Buffer) => {
      for (const [type, msg] of fromClient.push(chunk)) {
        const a = armed;
        if (a && (type === 0x50 /* P */ || type === 0x51) /* Q */ && msg.includes(a.text)) {
          armed = null;
          if (a.mode === 'before') {
            drop();
            a.done();
            return;
          }
          swallow = a.done;
        }
        if (!upstream.destroyed) upstream.write(msg);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      for (const [type, msg] of fromServer.push(chunk)) {
        if (swallow) {
          // ReadyForQuery: its status byte is 'I' once no transaction is open (the statement and
          // its implicit transaction are done and committed)
          if (type === 0x5a && msg[5] === 0x49) {
            const done = swallow;
            swallow = null;
            drop();
            done();
            return;
          }
          continue;
        }
        if (!client.destroyed) client.write(msg);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    arm: (text, mode) =>
      new Promise<void>((resolve) => {
        armed = { text, mode, done: resolve };
      }),
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}
