/**
 * The connections the ws capability opens: process state held on the queue's thread (never on a
 * worker, never in the queue's store). Each connection belongs to the harness that opened it (its
 * owner) and delivers its events to the harness and tool the dial named, through {@link WsHost}
 * (the runtime's queue):
 *   open     once, when the dial ends: empty body on success, the error text on failure (a
 *            failed dial ends the connection: no close follows);
 *   message  each text or binary frame, its bytes;
 *   close    once, when the connection ends after it opened: the reason.
 * One invocation at a time per connection, frames in arrival order: the next event waits until
 * the previous invocation finished, so a harness never races itself on its own keys. While
 * events wait, reading from the socket is paused beyond {@link PAUSE_AT} of them (TCP pushes back
 * on the server), and resumed once the backlog is short again.
 *
 * What is durable: a small record per open connection (id, target harness and tool, URL), kept by
 * the host per owner. A connection dies with its process; at the next start, when its owner is
 * deployed again, each recorded connection yields a `close` with reason `restart`, so the harness
 * learns it is gone (and may dial again) instead of waiting for frames that never come.
 *
 * Ids are decimal counters of this process, past every recorded id of the owner. An id another
 * harness opened answers exactly as one that does not exist.
 */
import { createRequire } from 'node:module';
import type { RawData, WebSocket } from 'ws';
import { ok, type CapabilityReply } from '../types.js';
import { eventArgs, RESTART_REASON, type WsEvent, type WsRequest } from './events.js';
import type { WsLimits } from './limits.js';

export { WS_DEFAULT_LIMITS, type WsLimits } from './limits.js';

/** The client library, loaded on the first dial (a process that never dials never loads it). */
let wsModule: typeof import('ws') | undefined;
function client(): typeof import('ws') {
  return (wsModule ??= createRequire(import.meta.url)('ws') as typeof import('ws'));
}

/** What became of one delivery: done (it ran, whatever it answered), retry later, or gone. */
export type Delivery = 'done' | 'retry' | 'gone';

/** One open connection as recorded durably. */
export interface WsRecord {
  id: number;
  /** the harness and tool its events reach */
  harness: string;
  tool: string;
  url: string;
}

/** What the connections need from the runtime that holds them. */
export interface WsHost {
  /**
   * Start `harness.tool` with `args` (raw argument bytes) through the queue and resolve once it
   * finished: 'done' when it ran (or failed or trapped), 'retry' when a limit of the queue
   * refused it for now, 'gone' when the harness or tool does not exist or the runtime closed.
   */
  deliver(harness: string, tool: string, args: Uint8Array): Promise<Delivery>;
  /** the records of `owner`'s open connections (empty when none); may throw */
  load(owner: string): WsRecord[];
  /** replace the records of `owner`'s open connections; may throw */
  save(owner: string, records: WsRecord[]): void;
  /** one line for the operator's log */
  log(line: string): void;
}

/** Events waiting beyond this pause reading from the socket. */
export const PAUSE_AT = 64;
/** Reading resumes when this few are left. */
const RESUME_AT = 16;
/** Longest wait between retries of a delivery a queue limit refused, ms. */
const MAX_RETRY_MS = 1000;
/** Budget of the opening handshake, ms. */
const HANDSHAKE_MS = 30_000;

interface Conn {
  id: number;
  owner: string;
  harness: string;
  tool: string;
  url: string;
  /** null for a connection known only from its record (a restart announcement) */
  socket: WebSocket | null;
  /** the socket is open (its `open` event was queued) */
  opened: boolean;
  /** counts toward the caps: its socket has not ended */
  live: boolean;
  /** its owner may address it (send, close) */
  addressable: boolean;
  /** the harness closed it */
  closedByHarness: boolean;
  /** an error seen before the socket closed, the close's reason */
  error: string | null;
  events: Uint8Array[];
  pumping: boolean;
  /** its last event is queued: forget it once delivered */
  final: boolean;
  /** undeployed or shut down: deliver nothing more */
  dropped: boolean;
  paused: boolean;
  /** sends waiting for the socket to open */
  pending: { data: Uint8Array; binary: boolean }[];
  /** frames queued or in flight */
  outbound: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function isText(b: Uint8Array): boolean {
  try {
    utf8.decode(b);
    return true;
  } catch {
    return false;
  }
}

function bytesOf(data: RawData): Uint8Array {
  if (Array.isArray(data)) return new Uint8Array(Buffer.concat(data));
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * Every connection of one process and the service the ws capability asks ({@link request}).
 * Lives on the queue's thread; every method answers, never throws.
 */
export class WsConnections {
  private readonly conns = new Map<number, Conn>();
  private readonly records = new Map<string, Map<number, WsRecord>>();
  private readonly perOwner = new Map<string, number>();
  private liveCount = 0;
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly host: WsHost,
    readonly limits: Readonly<WsLimits>,
  ) {}

  /** Connections open now (sockets not yet ended), over all harnesses. */
  get open(): number {
    return this.liveCount;
  }

  /**
   * Answer one request of the ws capability made by `owner` (the calling harness): open (reply:
   * the id), send, close (reply: no fields). Refusals name the cap; an id that `owner` does not
   * hold answers `no connection N is open`, whoever holds it.
   */
  request(owner: string, req: WsRequest): CapabilityReply {
    try {
      switch (req.op) {
        case 'open':
          return this.openOne(owner, req);
        case 'send':
          return this.send(owner, req.id, req.payload);
        case 'close':
          return this.closeOne(owner, req.id);
      }
    } catch (e) {
      return { error: e instanceof Error ? e.message : String(e) };
    }
  }

  /**
   * `owner` was deployed: the first time in this process, each connection its records name yields
   * a `close` with reason `restart` (the previous process held it), and later ids pass its ids.
   */
  recover(owner: string): void {
    if (this.records.has(owner)) return;
    let recs: WsRecord[] = [];
    try {
      recs = this.host.load(owner);
    } catch (e) {
      this.host.log(`ws: the connection records of ${owner} cannot be read: ${(e as Error).message}`);
    }
    const mine = new Map<number, WsRecord>();
    this.records.set(owner, mine);
    for (const r of recs) {
      mine.set(r.id, r);
      this.nextId = Math.max(this.nextId, r.id + 1);
      if (this.conns.has(r.id)) continue;
      const c = this.conn(r.id, owner, r.harness, r.tool, r.url, null);
      c.final = true;
      this.enqueue(c, 'close', RESTART_REASON);
    }
  }

  /** `name` was undeployed: close every connection it owns or that delivers to it, silently. */
  undeploy(name: string): void {
    for (const c of [...this.conns.values()]) {
      if (c.owner === name || c.harness === name) this.drop(c, true);
    }
    if (this.records.get(name)?.size === 0) this.records.delete(name);
  }

  /**
   * The process stops: end every socket, deliver nothing more, and keep the records, so the next
   * start announces each connection with a `close` of reason `restart`.
   */
  shutdown(): void {
    this.closed = true;
    for (const c of [...this.conns.values()]) this.drop(c, false);
  }

  // ---------------------------------------------------------------- requests

  private openOne(owner: string, req: Extract<WsRequest, { op: 'open' }>): CapabilityReply {
    if (this.closed) return { error: 'the runtime is shutting down; nothing was dialled' };
    const l = this.limits;
    const held = this.perOwner.get(owner) ?? 0;
    if (held >= l.wsHarnessConnections) {
      return {
        refused: `${owner} already holds ${held} connections, its limit (wsHarnessConnections ${l.wsHarnessConnections})`,
      };
    }
    if (this.liveCount >= l.wsConnections) {
      return {
        refused: `this process already holds ${this.liveCount} connections, its limit (wsConnections ${l.wsConnections})`,
      };
    }
    this.recover(owner);
    const id = this.nextId++;
    const rec: WsRecord = { id, harness: req.harness, tool: req.tool, url: req.url };
    const mine = this.records.get(owner)!;
    mine.set(id, rec);
    try {
      this.host.save(owner, [...mine.values()]);
    } catch (e) {
      mine.delete(id);
      return {
        error: `the connection could not be recorded, so ${req.url} was not dialled: ${(e as Error).message}`,
      };
    }
    let socket: WebSocket;
    try {
      socket = new (client().WebSocket)(req.url, {
        headers: Object.fromEntries(req.headers),
        maxPayload: l.wsMaxFrameBytes,
        handshakeTimeout: HANDSHAKE_MS,
        perMessageDeflate: false,
        followRedirects: false,
      });
    } catch (e) {
      mine.delete(id);
      this.saveQuietly(owner);
      return { refused: `cannot dial ${req.url}: ${(e as Error).message}` };
    }
    const c = this.conn(id, owner, req.harness, req.tool, req.url, socket);
    c.live = true;
    c.addressable = true;
    this.liveCount++;
    this.perOwner.set(owner, held + 1);
    this.watch(c, socket);
    return ok(String(id));
  }

  private send(owner: string, idText: string, payload: Uint8Array): CapabilityReply {
    const c = this.addressable(owner, idText);
    if (!c) return { refused: `no connection ${idText} is open` };
    const l = this.limits;
    if (payload.length > l.wsMaxFrameBytes) {
      return {
        refused: `a frame of ${payload.length} bytes exceeds the limit of ${l.wsMaxFrameBytes} (wsMaxFrameBytes); nothing was sent`,
      };
    }
    if (c.outbound >= l.wsQueueFrames) {
      return {
        refused: `connection ${idText} has ${c.outbound} frames waiting to go out, its limit (wsQueueFrames ${l.wsQueueFrames}); nothing was sent`,
      };
    }
    // a copy: the bytes came by structured clone, but the caller's view must not be kept
    const data = new Uint8Array(payload);
    const binary = !isText(data);
    c.outbound++;
    if (!c.opened) c.pending.push({ data, binary });
    else this.write(c, data, binary);
    return { fields: [] };
  }

  private closeOne(owner: string, idText: string): CapabilityReply {
    const c = this.addressable(owner, idText);
    if (!c) return { refused: `no connection ${idText} is open` };
    c.addressable = false;
    c.closedByHarness = true;
    if (c.opened) c.socket!.close(1000);
    else c.socket!.terminate();
    return { fields: [] };
  }

  private addressable(owner: string, idText: string): Conn | undefined {
    const c = this.conns.get(Number(idText));
    return c && c.owner === owner && c.addressable ? c : undefined;
  }

  // ---------------------------------------------------------------- sockets

  private conn(
    id: number,
    owner: string,
    harness: string,
    tool: string,
    url: string,
    socket: WebSocket | null,
  ): Conn {
    const c: Conn = {
      id,
      owner,
      harness,
      tool,
      url,
      socket,
      opened: false,
      live: false,
      addressable: false,
      closedByHarness: false,
      error: null,
      events: [],
      pumping: false,
      final: false,
      dropped: false,
      paused: false,
      pending: [],
      outbound: 0,
    };
    this.conns.set(id, c);
    return c;
  }

  private watch(c: Conn, socket: WebSocket): void {
    socket.on('open', () => {
      if (c.dropped) return;
      c.opened = true;
      this.enqueue(c, 'open', '');
      for (const p of c.pending.splice(0)) this.write(c, p.data, p.binary);
    });
    socket.on('message', (data: RawData) => {
      if (c.dropped) return;
      this.enqueue(c, 'message', bytesOf(data));
    });
    socket.on('error', (e: Error & { code?: string }) => {
      if (c.dropped || c.error !== null) return;
      c.error =
        e.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'
          ? `a frame exceeded the limit of ${this.limits.wsMaxFrameBytes} bytes (wsMaxFrameBytes)`
          : e.message;
    });
    socket.on('close', (code: number, reason: Buffer) => {
      this.ended(c);
      if (c.dropped) return;
      c.addressable = false;
      c.final = true;
      if (!c.opened) {
        // the dial failed (or the harness closed it before it opened)
        if (c.closedByHarness) this.enqueue(c, 'close', 'closed by the harness');
        else this.enqueue(c, 'open', c.error ?? `the connection closed before it opened (code ${code})`);
        return;
      }
      const why = c.closedByHarness
        ? 'closed by the harness'
        : (c.error ??
          `closed by the server (code ${code}${reason.length > 0 ? `: ${reason.toString('utf8')}` : ''})`);
      this.enqueue(c, 'close', why);
    });
  }

  private write(c: Conn, data: Uint8Array, binary: boolean): void {
    c.socket!.send(data, { binary }, () => {
      c.outbound--;
    });
  }

  /** The socket ended: it no longer counts toward the caps. */
  private ended(c: Conn): void {
    if (!c.live) return;
    c.live = false;
    this.liveCount--;
    const n = (this.perOwner.get(c.owner) ?? 1) - 1;
    if (n > 0) this.perOwner.set(c.owner, n);
    else this.perOwner.delete(c.owner);
  }

  /** Stop a connection: end its socket, forget its events; `forget`: its record too. */
  private drop(c: Conn, forget: boolean): void {
    c.dropped = true;
    c.addressable = false;
    c.events.length = 0;
    c.pending.length = 0;
    this.ended(c);
    c.socket?.terminate();
    this.conns.delete(c.id);
    if (forget) this.forget(c);
  }

  // ---------------------------------------------------------------- delivery

  private enqueue(c: Conn, event: WsEvent, body: Uint8Array | string): void {
    c.events.push(eventArgs(event, c.id, body));
    if (c.socket && !c.paused && c.events.length > PAUSE_AT && c.opened) {
      c.paused = true;
      c.socket.pause();
    }
    void this.pump(c);
  }

  /** Deliver `c`'s events one at a time, in order. */
  private async pump(c: Conn): Promise<void> {
    if (c.pumping) return;
    c.pumping = true;
    let backoff = 10;
    while (c.events.length > 0 && !c.dropped) {
      const r = await this.host.deliver(c.harness, c.tool, c.events[0]!).catch((e: unknown) => {
        this.host.log(`ws: connection ${c.id} of ${c.owner}: delivery failed: ${String(e)}`);
        return 'done' as const;
      });
      if (c.dropped) break;
      if (r === 'retry') {
        await new Promise((resolve) => setTimeout(resolve, backoff));
        backoff = Math.min(MAX_RETRY_MS, backoff * 2);
        continue;
      }
      backoff = 10;
      c.events.shift();
      if (r === 'gone') {
        this.host.log(
          `ws: connection ${c.id} of ${c.owner} closed: ${c.harness}.${c.tool} cannot take its events`,
        );
        this.drop(c, true);
        break;
      }
      if (c.paused && c.events.length <= RESUME_AT) {
        c.paused = false;
        c.socket?.resume();
      }
    }
    c.pumping = false;
    if (c.final && !c.dropped && c.events.length === 0) {
      this.conns.delete(c.id);
      this.forget(c);
    }
  }

  private forget(c: Conn): void {
    const mine = this.records.get(c.owner);
    if (mine?.delete(c.id)) this.saveQuietly(c.owner);
  }

  private saveQuietly(owner: string): void {
    try {
      this.host.save(owner, [...(this.records.get(owner)?.values() ?? [])]);
    } catch (e) {
      this.host.log(`ws: the connection records of ${owner} cannot be written: ${(e as Error).message}`);
    }
  }
}
