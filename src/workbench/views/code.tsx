/**
 * Code: for a guest function of a harness, its RISC-V disassembly beside the WebAssembly it was
 * translated to (WAT, printed by wabt on the daemon), row by row: each guest instruction's pc,
 * bytes and assembly next to the Wasm instructions emitted for it. Opened from a trap in the Run
 * transcript, the trapping pc's row is highlighted and scrolled into view.
 *
 * Shapes (GET /harnesses/{name}/code): {"functions":[{"name","pc","size"}]}; with ?function= or
 * ?pc=: {"name","pc","size","focus","rows":[{"pc","hex","asm","wat":[...]}],"wat"}.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { href } from '../router';
import { ErrorBox } from './ui';

interface Fn {
  name: string;
  pc: string;
  size: number;
}

interface Listing {
  name: string;
  pc: string;
  size: number;
  focus: string | null;
  rows: { pc: string; hex: string; asm: string; wat: string[] }[];
  wat: string;
}

export function CodeView(props: { harness: string; pc: string | null; fn: string | null }) {
  const [fns, setFns] = useState<Fn[] | null>(null);
  const [listing, setListing] = useState<Listing | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [filter, setFilter] = useState('');
  const focusRow = useRef<HTMLTableRowElement>(null);
  const base = `/harnesses/${encodeURIComponent(props.harness)}/code`;

  useEffect(() => {
    setError(null);
    api<{ functions: Fn[] }>('GET', base)
      .then((r) => setFns(r.functions))
      .catch((e: Error) => setError(e.message));
  }, [props.harness]);
  useEffect(() => {
    if (props.pc === null && props.fn === null) {
      setListing(null);
      return;
    }
    const q =
      props.pc !== null ? `pc=${encodeURIComponent(props.pc)}` : `function=${encodeURIComponent(props.fn!)}`;
    api<Listing>('GET', `${base}?${q}`)
      .then((l) => {
        setListing(l);
        setError(null);
      })
      .catch((e: Error) => setError(e.message));
  }, [props.harness, props.pc, props.fn]);
  useEffect(() => {
    focusRow.current?.scrollIntoView({ block: 'start' });
  }, [listing]);

  const shown = (fns ?? []).filter((f) => f.name.toLowerCase().includes(filter.toLowerCase()));
  return (
    <section class="code">
      <div class="view-head">
        <h1>
          Code of <a href={href('h', props.harness)}>{props.harness}</a>
        </h1>
      </div>
      <ErrorBox message={error} />
      <div class="code-grid">
        <nav class="card fn-list" aria-label="Guest functions">
          <label for="fn-filter">Functions</label>
          <input
            id="fn-filter"
            type="search"
            value={filter}
            onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
          />
          <ul>
            {shown.slice(0, 500).map((f) => (
              <li key={f.pc}>
                <a
                  href={`${href('code', props.harness)}?function=${encodeURIComponent(f.name)}`}
                  aria-current={listing?.name === f.name ? 'true' : undefined}
                >
                  <span>{f.name}</span> <code class="muted">{f.pc}</code>
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="card listing">
          {listing === null ? (
            <p class="muted">Choose a function.</p>
          ) : (
            <>
              <h2>
                <code>{listing.name}</code>{' '}
                <span class="muted">
                  at {listing.pc}, {listing.size} bytes
                </span>
              </h2>
              <div class="table-scroll">
                <table class="asm">
                  <thead>
                    <tr>
                      <th scope="col">pc</th>
                      <th scope="col">bytes</th>
                      <th scope="col">RISC-V</th>
                      <th scope="col">WebAssembly</th>
                    </tr>
                  </thead>
                  <tbody>
                    {listing.rows.map((r) => {
                      const focused = listing.focus !== null && r.pc === listing.focus;
                      return (
                        <tr
                          key={r.pc}
                          class={focused ? 'focus' : ''}
                          ref={focused ? focusRow : undefined}
                          data-pc={r.pc}
                          aria-current={focused ? 'true' : undefined}
                        >
                          <td>
                            <code>{r.pc}</code>
                          </td>
                          <td>
                            <code class="muted">{r.hex}</code>
                          </td>
                          <td>
                            <code>{r.asm}</code>
                          </td>
                          <td>
                            <pre class="wat">{r.wat.join('\n')}</pre>
                          </td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </div>
              <details>
                <summary>The whole function as WAT</summary>
                <pre class="wat">{listing.wat}</pre>
              </details>
            </>
          )}
        </div>
      </div>
    </section>
  );
}
