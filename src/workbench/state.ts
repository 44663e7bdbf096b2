/**
 * The page's live state: the deployed harnesses (loaded once, then kept current by the change
 * feed `GET /events`), the last outcome of each, and a connection flag. Views subscribe with
 * {@link useStore}; the feed is one EventSource for the whole page.
 */
import { useEffect, useState } from 'preact/hooks';
import { api } from './api';

/** A tool as `GET /harnesses/{name}` describes it. */
export interface Tool {
  name: string;
  description: string;
  parameters: unknown;
}

/** A harness as `GET /harnesses/{name}` describes it. */
export interface Harness {
  name: string;
  digest: string;
  usage: string;
  tools: Tool[];
  deps: string[];
  granted: { capabilities: string[]; [k: string]: unknown };
  deployed_at?: number;
}

/** One event of the change feed, as received. */
export interface FeedEvent {
  type: string;
  data: Record<string, unknown>;
  /** ms since the epoch, when the page received it */
  at: number;
}

interface State {
  harnesses: Map<string, Harness>;
  /** last finished invocation of each harness: outcome and when */
  last: Map<string, { outcome: string; at: number }>;
  loaded: boolean;
  live: boolean;
  /** bumped on every change, so subscribers re-render */
  version: number;
}

const state: State = { harnesses: new Map(), last: new Map(), loaded: false, live: false, version: 0 };
const listeners = new Set<() => void>();
const feedListeners = new Set<(e: FeedEvent) => void>();
let source: EventSource | null = null;

let pending: ReturnType<typeof setTimeout> | null = null;

/** Re-render subscribers, at most every 30 ms however fast events come. */
function changed(): void {
  state.version++;
  if (pending !== null) return;
  pending = setTimeout(() => {
    pending = null;
    for (const l of listeners) l();
  }, 30);
}

/** Subscribe a component to the state; returns it. */
export function useStore(): State {
  const [, set] = useState(0);
  useEffect(() => {
    const l = (): void => set((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return state;
}

/** Subscribe to the raw change feed while a component is mounted. */
export function useFeed(f: (e: FeedEvent) => void): void {
  useEffect(() => {
    feedListeners.add(f);
    return () => void feedListeners.delete(f);
  }, [f]);
}

/** Load the list (both the bare-array and the `{"harnesses"}` shapes of GET /harnesses). */
export async function loadHarnesses(): Promise<void> {
  const r = await api<Harness[] | { harnesses: Harness[] }>('GET', '/harnesses');
  const list = Array.isArray(r) ? r : r.harnesses;
  state.harnesses = new Map(list.map((h) => [h.name, h]));
  state.loaded = true;
  changed();
}

/** Record a harness the page itself deployed (the feed will say so too). */
export function putHarness(h: Harness): void {
  state.harnesses.set(h.name, h);
  changed();
}

/** Record a removal the page itself made. */
export function dropHarness(name: string): void {
  state.harnesses.delete(name);
  changed();
}

const FEED_TYPES = ['deploy', 'undeploy', 'wake.armed', 'wake.fired', 'wake.cancelled', 'invocation'];

/** Open the change feed (once); reconnects are EventSource's own, and reload the list. */
export function connectFeed(): void {
  if (source !== null) return;
  source = new EventSource('/events');
  source.onopen = () => {
    state.live = true;
    changed();
    // anything missed while disconnected
    void loadHarnesses().catch(() => {});
  };
  source.onerror = () => {
    state.live = false;
    changed();
  };
  for (const type of FEED_TYPES) {
    source.addEventListener(type, (m) => {
      const data = JSON.parse((m as MessageEvent<string>).data) as Record<string, unknown>;
      const e: FeedEvent = { type, data, at: Date.now() };
      if (type === 'deploy') state.harnesses.set(String(data.name), data as unknown as Harness);
      else if (type === 'undeploy') state.harnesses.delete(String(data.name));
      else if (type === 'invocation')
        state.last.set(String(data.harness), { outcome: String(data.outcome), at: e.at });
      for (const l of feedListeners) l(e);
      if (type === 'deploy' || type === 'undeploy' || type === 'invocation') changed();
    });
  }
}

/** Close the change feed (logout). */
export function disconnectFeed(): void {
  source?.close();
  source = null;
  state.live = false;
  state.harnesses = new Map();
  state.loaded = false;
  changed();
}
