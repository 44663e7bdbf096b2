/**
 * Wakes: the pending wakes grouped by harness with their due time, arming one (delay or instant,
 * payload, optional id), cancelling one, and the recent firings with their lateness. Kept current
 * by the change feed (wake.armed / wake.fired / wake.cancelled).
 */
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { href } from '../router';
import { useFeed, useStore, type FeedEvent } from '../state';
import { ErrorBox, relative } from './ui';

interface Wake {
  id: string;
  harness: string;
  due_at: number;
  payload: string;
  [k: string]: unknown;
}

interface Fired {
  id: string;
  harness: string;
  scheduled_at: number;
  fired_at: number;
  late_ms: number;
  attempt: number;
}

export function WakesView() {
  const store = useStore();
  const [wakes, setWakes] = useState<Wake[]>([]);
  const [pending, setPending] = useState(0);
  const [fired, setFired] = useState<Fired[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [harness, setHarness] = useState('');
  const [delay, setDelay] = useState('60000');
  const [payload, setPayload] = useState('');
  const [id, setId] = useState('');
  const [, tick] = useState(0);

  const load = useCallback(async () => {
    try {
      const r = await api<{ wakes: Wake[]; pending: number }>('GET', '/wakes?limit=1000');
      setWakes(r.wakes);
      setPending(r.pending);
      const f = await api<{ fired: Fired[] }>('GET', '/wakes/fired');
      setFired(f.fired);
    } catch (e) {
      setError((e as Error).message);
    }
  }, []);
  useEffect(() => {
    void load();
    const t = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(t);
  }, [load]);
  useFeed(
    useCallback((e: FeedEvent) => {
      if (e.type === 'wake.armed') {
        const w = e.data as unknown as Wake;
        setWakes((ws) => [...ws.filter((x) => x.id !== w.id), w].sort((a, b) => a.due_at - b.due_at));
        setPending((n) => n + 1);
      } else if (e.type === 'wake.cancelled' || e.type === 'wake.fired') {
        setWakes((ws) => ws.filter((x) => x.id !== e.data.id));
        setPending((n) => Math.max(0, n - 1));
        if (e.type === 'wake.fired') setFired((f) => [e.data as unknown as Fired, ...f].slice(0, 100));
      }
    }, []),
  );

  const names = [...store.harnesses.keys()].sort();
  const arm = async (e: Event): Promise<void> => {
    e.preventDefault();
    setError(null);
    try {
      await api('POST', '/wakes', {
        harness: harness || names[0],
        delay_ms: Number(delay),
        ...(payload !== '' ? { payload } : {}),
        ...(id !== '' ? { id } : {}),
      });
      setId('');
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const cancel = async (wid: string): Promise<void> => {
    setError(null);
    try {
      await api('DELETE', `/wakes/${encodeURIComponent(wid)}`);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const groups = new Map<string, Wake[]>();
  for (const w of wakes) groups.set(w.harness, [...(groups.get(w.harness) ?? []), w]);
  const now = Date.now();
  return (
    <section>
      <div class="view-head">
        <h1>Wakes</h1>
        <span class="muted">{pending} pending</span>
      </div>
      <form class="card" onSubmit={(e) => void arm(e)}>
        <h2>Arm a wake</h2>
        <div class="grid4">
          <div class="field">
            <label for="wake-harness">Harness</label>
            <select
              id="wake-harness"
              value={harness || names[0]}
              onChange={(e) => setHarness((e.target as HTMLSelectElement).value)}
            >
              {names.map((n) => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          </div>
          <div class="field">
            <label for="wake-delay">Delay (ms)</label>
            <input
              id="wake-delay"
              type="number"
              min={0}
              step={1}
              required
              value={delay}
              onInput={(e) => setDelay((e.target as HTMLInputElement).value)}
            />
          </div>
          <div class="field">
            <label for="wake-payload">Payload</label>
            <input
              id="wake-payload"
              value={payload}
              onInput={(e) => setPayload((e.target as HTMLInputElement).value)}
            />
          </div>
          <div class="field">
            <label for="wake-id">Id (optional)</label>
            <input
              id="wake-id"
              value={id}
              maxLength={128}
              onInput={(e) => setId((e.target as HTMLInputElement).value)}
            />
          </div>
        </div>
        <button class="primary" type="submit" disabled={names.length === 0}>
          Arm
        </button>
      </form>
      <ErrorBox message={error} />
      <h2>Pending</h2>
      {wakes.length === 0 ? (
        <p class="muted">No wake is pending.</p>
      ) : (
        [...groups].map(([name, ws]) => (
          <div class="card" key={name}>
            <h3>
              <a href={href('h', name)}>{name}</a> <span class="muted">{ws.length}</span>
            </h3>
            <table class="wakes">
              <thead>
                <tr>
                  <th scope="col">Id</th>
                  <th scope="col">Due</th>
                  <th scope="col">Payload</th>
                  <th scope="col">
                    <span class="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {ws.map((w) => (
                  <tr key={w.id} data-wake={w.id}>
                    <td>
                      <code>{w.id}</code>
                    </td>
                    <td>
                      <time
                        dateTime={new Date(w.due_at).toISOString()}
                        title={new Date(w.due_at).toISOString()}
                      >
                        {relative(w.due_at, now)}
                      </time>
                    </td>
                    <td class="payload">{w.payload}</td>
                    <td>
                      <button
                        type="button"
                        class="ghost"
                        onClick={() => void cancel(w.id)}
                        aria-label={`Cancel wake ${w.id}`}
                      >
                        Cancel
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ))
      )}
      <h2>Recent firings</h2>
      {fired.length === 0 ? (
        <p class="muted">None since bermd started.</p>
      ) : (
        <table class="fired card">
          <thead>
            <tr>
              <th scope="col">Harness</th>
              <th scope="col">Id</th>
              <th scope="col">Fired</th>
              <th scope="col">Late</th>
              <th scope="col">Attempt</th>
            </tr>
          </thead>
          <tbody>
            {fired.map((f) => (
              <tr key={`${f.id}-${f.fired_at}`}>
                <td>{f.harness}</td>
                <td>
                  <code>{f.id}</code>
                </td>
                <td>{relative(f.fired_at, now)}</td>
                <td class={f.late_ms > 1000 ? 'warn' : ''}>{f.late_ms} ms</td>
                <td>{f.attempt}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
