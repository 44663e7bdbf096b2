/**
 * Who gets a connection slot: the cap on connections served at once (--max-connections) and on
 * those from one address (--max-connections-per-address), and which connection gives way when a
 * cap is reached.
 *
 * A connection that has not finished the headers of its first request has cost its client almost
 * nothing and has not been authenticated: a slowloris client opens hundreds and sends a byte now
 * and then. So at a cap the oldest such connection (of that address, for the per-address cap) is
 * closed in favour of the new one, and only when there is none is the new connection turned away
 * (503 on its first request). A connection with a request in progress or done (an MCP stream, a
 * kept-alive client) is never closed for a newcomer. The bookkeeping is a few map operations per
 * connection and one counter per request.
 */
import type { Socket } from 'node:net';

/** Why a connection was shed. */
export type ShedReason =
  /** closed before finishing its headers, in favour of a new connection at a cap */
  | 'evicted'
  /** turned away: the global cap is reached and every connection has begun a request */
  | 'over-capacity'
  /** turned away: its address's cap is reached and each of its connections has begun a request */
  | 'per-address';

interface Conn {
  addr: string;
  /** requests whose headers arrived on it; 0 = still on the first request's headers */
  requests: number;
}

/** The connection caps and their bookkeeping (see the module comment). */
export class ConnectionGate {
  private readonly conns = new Map<Socket, Conn>();
  /** served connections that have not finished their first request's headers, oldest first */
  private readonly fresh = new Set<Socket>();
  /** the same, by remote address */
  private readonly freshByAddr = new Map<string, Set<Socket>>();
  private readonly perAddr = new Map<string, number>();

  /**
   * @param max most connections served at once (≥ 1)
   * @param maxPerAddress most connections served at once from one remote address (≥ 1)
   * @param shed told of every connection closed or turned away, with the reason
   */
  constructor(
    readonly max: number,
    readonly maxPerAddress: number,
    private readonly shed: (reason: ShedReason) => void,
  ) {}

  /** Connections served now. */
  get served(): number {
    return this.conns.size;
  }

  /**
   * A new connection: admit it, closing the oldest connection without finished headers when a cap
   * is reached, or turn it away.
   * @returns null when it is served, else why it is turned away (its first request gets a 503)
   */
  admit(s: Socket): ShedReason | null {
    const addr = s.remoteAddress ?? '';
    if (this.conns.size >= this.max && !this.evictOldest(this.fresh)) return this.refuse('over-capacity');
    if ((this.perAddr.get(addr) ?? 0) >= this.maxPerAddress && !this.evictOldest(this.freshByAddr.get(addr)))
      return this.refuse('per-address');
    this.conns.set(s, { addr, requests: 0 });
    this.perAddr.set(addr, (this.perAddr.get(addr) ?? 0) + 1);
    this.fresh.add(s);
    let set = this.freshByAddr.get(addr);
    if (set === undefined) this.freshByAddr.set(addr, (set = new Set()));
    set.add(s);
    return null;
  }

  /** A request's headers arrived on `s`: from now on it is never closed for a newcomer. */
  request(s: Socket): void {
    const c = this.conns.get(s);
    if (c === undefined || c.requests++ > 0) return;
    this.unfresh(s, c.addr);
  }

  /** `s` closed (whatever closed it). */
  closed(s: Socket): void {
    const c = this.conns.get(s);
    if (c === undefined) return;
    this.conns.delete(s);
    if (c.requests === 0) this.unfresh(s, c.addr);
    const n = (this.perAddr.get(c.addr) ?? 1) - 1;
    if (n === 0) this.perAddr.delete(c.addr);
    else this.perAddr.set(c.addr, n);
  }

  private refuse(reason: ShedReason): ShedReason {
    this.shed(reason);
    return reason;
  }

  /** Close the oldest connection of `set` (none: false); its slot is free at once. */
  private evictOldest(set: Set<Socket> | undefined): boolean {
    if (set === undefined) return false;
    const oldest = set.values().next();
    if (oldest.done === true) return false;
    const s = oldest.value;
    this.closed(s);
    s.destroy();
    this.shed('evicted');
    return true;
  }

  private unfresh(s: Socket, addr: string): void {
    this.fresh.delete(s);
    const set = this.freshByAddr.get(addr);
    if (set === undefined) return;
    set.delete(s);
    if (set.size === 0) this.freshByAddr.delete(addr);
  }
}
