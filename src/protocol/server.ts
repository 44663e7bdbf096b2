/**
 * berm's protocol endpoint: the agent-daemon side of the door. The agent daemon (or any trusted
 * client of it, e.g. a user asking for "foo tomorrow at 08:00") connects to bermd over a Unix
 * socket or loopback TCP and speaks the same framing and messages as the daemon itself
 * (./frame.ts, ./schema.ts). The endpoint serves what berm owns:
 *
 * - `ClientMessage.berm.schedule_wake` {at_ms | delay_ms, harness, entry, payload, id}: arms a wake
 *   of the harness's `on_wake` (entry empty or `on_wake`; the due-set behind the endpoint decides
 *   which other entries it serves) in the same due-set a guest's protocol:schedule and the HTTP
 *   API's POST /wakes use. Answers `berm.wake`.
 * - `berm.cancel_wake` {id} -> `berm.cancelled`; `berm.list_wakes` {harness?} -> `berm.wake_list`.
 * - `subscribe_event` whose target_agent is `harness:<name>` -> `subscription_info` (persisted);
 *   `unsubscribe_event` -> `pong`; `list_subscriptions` -> `subscription_list` (harness targets).
 * - `publish_event` -> delivered to the subscribed harnesses' on_notify (a fresh chain) -> `pong`.
 * - `ping` -> `pong`.
 * Anything else answers an ErrorMsg (code 501) saying it belongs to the agent daemon. A request
 * the store behind it fails (its database away, a full disk) answers 503 with the cause: retry.
 *
 * Trust: whoever can connect may schedule any harness, so the endpoint listens only on a Unix
 * socket (created mode 0600) or a loopback TCP address; anything else is refused at listen time.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { endpointText, parseEndpoint, type Endpoint } from './client.js';
import type { WakeView } from './door.js';
import { storeFault } from '../store/store-fault.js';
import { HarnessEventBus, SubscriptionError, targetHarness } from './events.js';
import { FrameReader, MAX_FRAME, frame } from './frame.js';
import { decodeClient, encode, encodeServer, member, messageType, type Plain } from './schema.js';

/** The due-set as the endpoint reaches it (any harness, any entry: the caller is trusted). */
export interface ServerWakes {
  /** @returns the armed wake, or why it is refused (unknown harness, no on_wake, no such tool...) */
  arm(w: {
    harness: string;
    entry: string;
    atMs: number;
    payload: string;
    id?: string;
  }): WakeView | { refused: string } | Promise<WakeView | { refused: string }>;
  cancel(id: string): boolean | Promise<boolean>;
  /** the earliest pending wakes (of `harness`, when given), bounded, and whether more are pending */
  list(
    harness?: string,
  ): { wakes: WakeView[]; truncated: boolean } | Promise<{ wakes: WakeView[]; truncated: boolean }>;
}

/** Requests of one connection being answered at once (their answers are written in order). */
const MAX_IN_FLIGHT = 8;

/** Bytes of a varint encoding `n` (protobuf length prefixes). */
function varintBytes(n: number): number {
  let k = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    k++;
  }
  return k;
}

/**
 * The earliest of `wakes` (the due-set lists them earliest first) whose WakeList fits one frame,
 * with `truncated` when some were left out: a due-set may hold a thousand listed wakes of up to
 * 64 KiB of payload each, more than a frame carries.
 */
export function fitWakes(wakes: WakeView[]): { wakes: WakeView[]; truncated?: true } {
  // room for the wrappers: ServerMessage.berm, BermServerMessage.wake_list, WakeList.truncated
  let size = 64;
  const info = messageType('WakeInfo');
  for (let i = 0; i < wakes.length; i++) {
    const n = encode(info, wakes[i] as unknown as Plain).length;
    size += 1 + varintBytes(n) + n;
    if (size > MAX_FRAME) return { wakes: wakes.slice(0, i), truncated: true };
  }
  return { wakes };
}

/**
 * Make way for the endpoint's Unix socket at `p`: a socket left behind by a daemon that died is
 * removed; anything else there is refused, never deleted (a mistyped path naming a file, say the
 * declarations, would otherwise be lost), and so is a socket some process still accepts on.
 * @throws Error naming the path and what is there
 */
async function clearSocketPath(p: string): Promise<void> {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(p);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new Error(`berm's protocol endpoint ${p}: ${(e as Error).message}`);
  }
  if (!st.isSocket()) {
    throw new Error(
      `berm's protocol endpoint ${p} exists and is not a socket (refused, not deleted): choose another path`,
    );
  }
  const live = await new Promise<boolean>((resolve) => {
    const c = net.connect({ path: p });
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });
  if (live) throw new Error(`berm's protocol endpoint ${p} is in use: another process accepts on it`);
  fs.rmSync(p, { force: true });
}

/**
 * Longest Unix socket path, in bytes: Linux's sun_path holds 108 with the terminating NUL. Node
 * binds a longer path cut short, silently, at another name.
 */
const MAX_SOCKET_PATH = 107;

/**
 * A new directory beside `p` (mode 0700) whose socket path `dir/s` is no longer than `p` whenever
 * `p`'s name has 4 bytes or more, so a path that fits a socket address still fits bound there.
 * @throws Error from mkdir (the directory beside `p` cannot be written...)
 */
function privateDirBeside(p: string): string {
  const k = Math.min(8, Math.max(1, Buffer.byteLength(path.basename(p)) - 3));
  for (let tries = 0; ; tries++) {
    const name = '.' + Array.from({ length: k }, () => Math.floor(Math.random() * 36).toString(36)).join('');
    const dir = path.join(path.dirname(p), name);
    try {
      fs.mkdirSync(dir, { mode: 0o700 });
      return dir;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || tries >= 100) throw e;
    }
  }
}

/**
 * Listen on a Unix socket at `p` that no one but its owner can connect to, at any instant.
 * Binding at `p` creates the socket with the process umask's permissions (0777 under umask 0) until
 * a chmod, and whoever connects in between keeps that connection; so the socket is bound in a
 * fresh 0700 directory beside `p`, made 0600 there, and only then linked at `p` (link, not rename:
 * it fails if something was put at `p` since clearSocketPath, which is thus never replaced).
 * @returns the socket file's identity, to remove only that file at close
 * @throws Error naming `p` when it is too long for a socket address, when the directory beside it
 *   cannot be written, or when the bind fails
 */
async function listenPrivate(server: net.Server, p: string): Promise<{ dev: number; ino: number }> {
  const fail = (why: string): Error => new Error(`berm's protocol endpoint ${p}: ${why}`);
  if (Buffer.byteLength(p) > MAX_SOCKET_PATH) {
    throw fail(`a Unix socket path has at most ${MAX_SOCKET_PATH} bytes, this one ${Buffer.byteLength(p)}`);
  }
  let dir: string;
  try {
    dir = privateDirBeside(p);
  } catch (e) {
    throw fail((e as Error).message);
  }
  const tmp = path.join(dir, 's');
  try {
    if (Buffer.byteLength(tmp) > MAX_SOCKET_PATH) {
      throw new Error(`too long to bind beside it (${tmp}): give the socket a name of 4 characters or more`);
    }
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(tmp, () => {
        server.off('error', reject);
        resolve();
      });
    });
    try {
      fs.chmodSync(tmp, 0o600);
      fs.linkSync(tmp, p);
    } catch (e) {
      server.close();
      throw e;
    }
    const st = fs.lstatSync(p);
    return { dev: st.dev, ino: st.ino };
  } catch (e) {
    throw fail((e as Error).message);
  } finally {
    fs.rmSync(tmp, { force: true });
    fs.rmdirSync(dir);
  }
}

/** Options of {@link ProtocolServer.listen}. */
export interface ProtocolServerOptions {
  /** `unix:/path`, `/path` or `127.0.0.1:port` (port 0: any free one) */
  endpoint: string;
  wakes: ServerWakes;
  events?: HarnessEventBus;
  /** one line per request served (op, outcome) */
  log?: (line: string) => void;
  /** clock, ms since the epoch */
  now?: () => number;
  /** most connections open at once; more are closed as they arrive (default 16) */
  maxConnections?: number;
  /**
   * Why the due-set cannot be used yet (bermd restoring its deployments), or null when it can:
   * while it says why, every request but ping is answered ErrorMsg 503 with that text, an answer
   * a client retries (a 422 "no harness named ..." for a harness not yet restored is final)
   */
  notReady?: () => string | null;
}

/**
 * Default bound on the endpoint's open connections. The agent daemon holds one or a few; without a
 * bound, a peer that opens connections and keeps them (or a daemon that leaks them on every
 * reconnect) spent one file descriptor each until bermd's own files (SQLite, the journal) could no
 * longer be opened. These few fit in the descriptors bermd keeps out of its HTTP connection cap
 * (FD_RESERVE in src/daemon/fd-limit.ts, 128).
 */
export const MAX_ENDPOINT_CONNECTIONS = 16;

/** The endpoint (see the module comment). */
export class ProtocolServer {
  private readonly sockets = new Set<net.Socket>();
  /** the Unix socket's path and file (close removes it only while that file is there) */
  private socketPath: string | undefined;
  private socketId: { dev: number; ino: number } | undefined;

  private constructor(
    private readonly server: net.Server,
    private readonly options: ProtocolServerOptions,
  ) {}

  /**
   * Listen on `options.endpoint`.
   * @throws Error for a non-loopback TCP address; for a Unix socket path where something other
   *   than a stale socket lies (a file, a directory, a live socket: never deleted); or when the
   *   listen fails (address in use...)
   */
  static async listen(options: ProtocolServerOptions): Promise<ProtocolServer> {
    const ep: Endpoint = parseEndpoint(options.endpoint);
    if ('host' in ep && !['127.0.0.1', '::1', 'localhost'].includes(ep.host)) {
      throw new Error(
        `berm's protocol endpoint listens on a Unix socket or loopback only, not ${endpointText(ep)}: anyone who connects may schedule any harness`,
      );
    }
    if ('path' in ep) await clearSocketPath(ep.path);
    const server = net.createServer();
    server.maxConnections = options.maxConnections ?? MAX_ENDPOINT_CONNECTIONS;
    const s = new ProtocolServer(server, options);
    server.on('connection', (c) => s.serve(c));
    if ('path' in ep) {
      s.socketPath = ep.path;
      s.socketId = await listenPrivate(server, ep.path);
    } else {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(ep.port, ep.host, resolve);
      });
    }
    return s;
  }

  /** Where it listens (`unix:/path` or `host:port`). */
  get endpoint(): string {
    if (this.socketPath !== undefined) return `unix:${this.socketPath}`;
    const a = this.server.address() as net.AddressInfo;
    return `${a.address}:${a.port}`;
  }

  /** Stop listening and drop every connection; the Unix socket is removed if it is still ours. */
  async close(): Promise<void> {
    for (const c of this.sockets) c.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.socketPath !== undefined && this.socketId !== undefined) {
      try {
        const st = fs.lstatSync(this.socketPath);
        if (st.dev === this.socketId.dev && st.ino === this.socketId.ino) fs.unlinkSync(this.socketPath);
      } catch {
        // gone already
      }
    }
  }

  private serve(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    const reader = new FrameReader();
    // Requests are answered a few at a time, and not while the socket's write buffer is over its
    // high-water mark (the peer leaves answers unread): a peer that pipelines requests and never
    // reads would otherwise have every answer built and queued in memory (60 MB of pings held
    // 1.4 GB; 5,000 list_wakes in one 45 KB write, ~300 MB). Unanswered frames wait here; the
    // socket is paused while any wait, so the kernel's buffers, then the peer's writes, fill.
    const waiting: Uint8Array[] = [];
    let next = 0;
    let inFlight = 0;
    let pending: Promise<void> = Promise.resolve();
    const pump = (): void => {
      while (
        next < waiting.length &&
        inFlight < MAX_IN_FLIGHT &&
        !socket.writableNeedDrain &&
        !socket.destroyed
      ) {
        const reply = this.answer(waiting[next++]!);
        inFlight++;
        // answers go out in request order even when one is slower than the next; answer() never
        // rejects and keeps within a frame, and anything unforeseen ends this connection only
        pending = pending
          .then(async () => {
            const bytes = await reply;
            if (!socket.destroyed) socket.write(frame(bytes));
          })
          .catch(() => {
            socket.destroy();
          })
          .finally(() => {
            inFlight--;
            pump();
          });
      }
      if (next === waiting.length) {
        waiting.length = 0;
        next = 0;
        if (socket.isPaused()) socket.resume();
      } else if (!socket.isPaused()) socket.pause();
    };
    socket.on('drain', pump);
    socket.on('data', (chunk: Buffer) => {
      let frames: Uint8Array[];
      try {
        frames = reader.push(chunk);
      } catch {
        socket.destroy();
        return;
      }
      for (const f of frames) waiting.push(f);
      pump();
    });
  }

  /**
   * The encoded ServerMessage answering one encoded ClientMessage, at most {@link MAX_FRAME}
   * bytes (a larger answer becomes an ErrorMsg 413 naming its size: it could not be framed).
   * Never rejects.
   */
  async answer(request: Uint8Array): Promise<Uint8Array> {
    const bytes = await this.answerUnbounded(request);
    if (bytes.length <= MAX_FRAME) return bytes;
    this.options.log?.(`protocol endpoint: answer of ${bytes.length} bytes refused (over the frame limit)`);
    return encodeServer('error', {
      code: 413,
      message: `the answer is ${bytes.length} bytes, over the frame limit of ${MAX_FRAME}`,
    });
  }

  private async answerUnbounded(request: Uint8Array): Promise<Uint8Array> {
    const err = (code: number, message: string) => encodeServer('error', { code, message });
    let op = '(undecodable)';
    const log = (outcome: string) => this.options.log?.(`protocol endpoint: ${op} ${outcome}`);
    try {
      const m = member(decodeClient(request));
      if (!m) {
        log('refused: empty');
        return err(400, 'empty client message');
      }
      op = m.name;
      let body = m.body;
      if (op === 'berm') {
        const inner = member(body);
        if (!inner) return err(400, 'empty berm message');
        op = inner.name;
        body = inner.body;
      }
      const waitFor = op === 'ping' ? null : (this.options.notReady?.() ?? null);
      if (waitFor !== null) {
        log(`unavailable: ${waitFor}`);
        return err(503, waitFor);
      }
      const reply = await this.dispatch(op, body);
      log(reply.ok ? 'ok' : `error: ${reply.error}`);
      return reply.ok ? reply.bytes : err(reply.code, reply.error);
    } catch (e) {
      log(`error: ${(e as Error).message}`);
      // the store failing (its database away, a full disk) is no fault of the request: retry later
      const fault = storeFault(e);
      return fault === null ? err(400, (e as Error).message) : err(503, `${fault}: ${(e as Error).message}`);
    }
  }

  private async dispatch(
    op: string,
    b: Plain,
  ): Promise<{ ok: true; bytes: Uint8Array } | { ok: false; code: number; error: string }> {
    const str = (k: string) => (typeof b[k] === 'string' ? (b[k] as string) : '');
    const ok = (bytes: Uint8Array) => ({ ok: true as const, bytes });
    const fail = (code: number, error: string) => ({ ok: false as const, code, error });
    const events = this.options.events;
    switch (op) {
      case 'ping':
        return ok(encodeServer('pong', {}));
      case 'schedule_wake': {
        const harness = str('harness');
        if (harness === '') return fail(400, 'schedule_wake: harness is required');
        const now = (this.options.now ?? Date.now)();
        const at = Number(b.at_ms ?? 0);
        const atMs = at > 0 ? at : now + Number(b.delay_ms ?? 0);
        if (!Number.isSafeInteger(atMs))
          return fail(400, `schedule_wake: instant ${atMs} is not a safe integer`);
        const w = await this.options.wakes.arm({
          harness,
          entry: str('entry') === '' ? 'on_wake' : str('entry'),
          atMs,
          payload: str('payload'),
          ...(str('id') !== '' ? { id: str('id') } : {}),
        });
        if ('refused' in w) return fail(422, `schedule_wake: ${w.refused}`);
        return ok(encodeServer('berm', { wake: w }));
      }
      case 'cancel_wake': {
        const id = str('id');
        return ok(
          encodeServer('berm', { cancelled: { id, cancelled: await this.options.wakes.cancel(id) } }),
        );
      }
      case 'list_wakes': {
        const h = str('harness');
        const page = await this.options.wakes.list(h === '' ? undefined : h);
        const fit = fitWakes(page.wakes);
        return ok(encodeServer('berm', { wake_list: page.truncated ? { ...fit, truncated: true } : fit }));
      }
      case 'subscribe_event': {
        if (!events) return fail(501, 'subscribe_event: this endpoint has no event bus');
        const harness = targetHarness(str('target_agent'));
        if (!harness) {
          return fail(
            400,
            `subscribe_event: berm's endpoint subscribes harnesses (target_agent "harness:<name>"); subscribe agents at the agent daemon`,
          );
        }
        try {
          const s = events.subscribe(harness, str('source'), b.once === true);
          return ok(encodeServer('subscription_info', HarnessEventBus.view(s)));
        } catch (e) {
          if (e instanceof SubscriptionError) return fail(400, `subscribe_event: ${e.message}`);
          throw e;
        }
      }
      case 'unsubscribe_event': {
        if (!events) return fail(501, 'unsubscribe_event: this endpoint has no event bus');
        const id = Number(b.id ?? 0);
        return events.unsubscribe(id) ? ok(encodeServer('pong', {})) : fail(404, `no subscription ${id}`);
      }
      case 'list_subscriptions':
        if (!events) return fail(501, 'list_subscriptions: this endpoint has no event bus');
        return ok(
          encodeServer('subscription_list', { subscriptions: events.list().map(HarnessEventBus.view) }),
        );
      case 'publish_event': {
        if (!events) return fail(501, 'publish_event: this endpoint has no event bus');
        if (str('source') === '') return fail(400, 'publish_event: source is empty');
        events.publish(str('source'), str('payload'));
        return ok(encodeServer('pong', {}));
      }
      default:
        return fail(
          501,
          `${op} is the agent daemon's; berm's endpoint serves ping, schedule_wake, cancel_wake, list_wakes and the harness event bus`,
        );
    }
  }
}
