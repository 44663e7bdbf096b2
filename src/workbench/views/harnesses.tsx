/**
 * Harnesses: every deployed harness with its tool count, short digest and last outcome, filtered
 * as you type. Only the rows in view are in the DOM (a fixed row height and a spacer above and
 * below), so a thousand harnesses scroll and filter as smoothly as ten.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { href } from '../router';
import { useStore } from '../state';
import { Chip, Digest } from './ui';

/** Height of one row, px (the stylesheet's .hrow). */
export const ROW_HEIGHT = 56;
const OVERSCAN = 8;

export function HarnessesView() {
  const store = useStore();
  const [filter, setFilter] = useState('');
  const [scroll, setScroll] = useState(0);
  const [height, setHeight] = useState(600);
  const box = useRef<HTMLDivElement>(null);
  const all = useMemo(
    () => [...store.harnesses.values()].sort((a, b) => a.name.localeCompare(b.name)),
    [store.version],
  );
  const q = filter.trim().toLowerCase();
  const shown = useMemo(
    () =>
      q === ''
        ? all
        : all.filter(
            (h) =>
              h.name.includes(q) ||
              h.digest.startsWith(q) ||
              h.tools.some((t) => t.name.toLowerCase().includes(q)) ||
              h.usage.toLowerCase().includes(q),
          ),
    [all, q],
  );
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = (): void => setHeight(el.clientHeight);
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const first = Math.max(0, Math.floor(scroll / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(shown.length, Math.ceil((scroll + height) / ROW_HEIGHT) + OVERSCAN);
  const rows = shown.slice(first, last);
  return (
    <section class="harnesses">
      <div class="view-head">
        <h1>Harnesses</h1>
        <span class="muted" aria-live="polite" data-count={shown.length}>
          {q === '' ? `${all.length} deployed` : `${shown.length} of ${all.length}`}
        </span>
        <a class="button primary" href="#/deploy">
          Deploy
        </a>
      </div>
      <label class="sr-only" for="filter">
        Filter harnesses
      </label>
      <input
        id="filter"
        type="search"
        placeholder="Filter by name, tool, usage or digest"
        value={filter}
        onInput={(e) => {
          setFilter((e.target as HTMLInputElement).value);
          if (box.current) box.current.scrollTop = 0;
          setScroll(0);
        }}
      />
      {store.loaded && all.length === 0 ? (
        <div class="empty card">
          <p>No harness is deployed yet.</p>
          <a class="button primary" href="#/deploy">
            Deploy one
          </a>
        </div>
      ) : (
        <div
          class="hlist"
          ref={box}
          onScroll={(e) => setScroll((e.target as HTMLDivElement).scrollTop)}
          tabIndex={-1}
        >
          <ul aria-label="Deployed harnesses" style={{ height: `${shown.length * ROW_HEIGHT}px` }}>
            {rows.map((h, i) => {
              const last = store.last.get(h.name);
              return (
                <li
                  key={h.name}
                  class="hrow"
                  style={{ top: `${(first + i) * ROW_HEIGHT}px` }}
                  aria-setsize={shown.length}
                  aria-posinset={first + i + 1}
                  data-harness={h.name}
                >
                  <a href={href('h', h.name)}>
                    <span class="hname">{h.name}</span>
                    <span class="husage muted">{h.usage}</span>
                  </a>
                  <span class="htools">
                    {h.tools.length} tool{h.tools.length === 1 ? '' : 's'}
                  </span>
                  <Digest value={h.digest} />
                  {last ? <Chip kind={last.outcome} /> : <Chip kind="ready" />}
                </li>
              );
            })}
          </ul>
        </div>
      )}
    </section>
  );
}
