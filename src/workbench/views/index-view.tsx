/**
 * Index: search the index bermd is configured with (the daemon asks it, so the browser meets no
 * CORS rule), each result's tools and publisher, Install (bermd pulls and deploys it), and
 * "installed" when a deployed harness has the result's digest.
 */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { href } from '../router';
import { useStore } from '../state';
import { nameFromFile } from './deploy';
import { Digest, ErrorBox } from './ui';

interface Entry {
  reference: string;
  digest: string;
  publisher?: string;
  usage: string;
  tools: (string | { name: string; description?: string })[];
  installed: boolean;
}

/** The harness name an install proposes: the reference's last path segment without tag or digest. */
export function nameFromReference(ref: string): string {
  const last = ref.split('/').pop() ?? '';
  return nameFromFile((last.split('@')[0] ?? '').split(':')[0] + '.x');
}

export function IndexView() {
  const store = useStore();
  const [q, setQ] = useState('');
  const [results, setResults] = useState<Entry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const digests = new Set([...store.harnesses.values()].map((h) => h.digest));

  const search = async (e: Event): Promise<void> => {
    e.preventDefault();
    setError(null);
    try {
      setResults(await api<Entry[]>('GET', `/index?q=${encodeURIComponent(q)}`));
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const install = async (entry: Entry): Promise<void> => {
    setError(null);
    setBusy(entry.reference);
    try {
      await api('POST', '/index/install', {
        reference: entry.reference,
        name: nameFromReference(entry.reference),
      });
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(null);
    }
  };
  return (
    <section>
      <div class="view-head">
        <h1>Index</h1>
      </div>
      <form class="row search" role="search" onSubmit={(e) => void search(e)}>
        <label class="sr-only" for="index-q">
          Search the index
        </label>
        <input
          id="index-q"
          type="search"
          placeholder="Search harnesses"
          value={q}
          onInput={(e) => setQ((e.target as HTMLInputElement).value)}
        />
        <button class="primary" type="submit">
          Search
        </button>
      </form>
      <ErrorBox message={error} />
      {results !== null && results.length === 0 && <p class="muted">Nothing found.</p>}
      <ul class="results">
        {(results ?? []).map((r) => {
          const installed = r.installed || digests.has(r.digest.replace(/^sha256:/, ''));
          const installedAs = [...store.harnesses.values()].find(
            (h) => h.digest === r.digest.replace(/^sha256:/, ''),
          );
          return (
            <li class="card" key={r.reference} data-reference={r.reference}>
              <div class="row">
                <code class="ref">{r.reference}</code>
                {installed ? (
                  <span class="chip chip-ok" data-installed="true">
                    installed{installedAs ? ` as ${installedAs.name}` : ''}
                  </span>
                ) : (
                  <button
                    type="button"
                    class="primary"
                    disabled={busy !== null}
                    onClick={() => void install(r)}
                  >
                    {busy === r.reference ? 'Installing…' : 'Install'}
                  </button>
                )}
              </div>
              <p>{r.usage}</p>
              <p class="muted">
                {r.publisher ? `by ${r.publisher} · ` : ''}
                <Digest value={r.digest.replace(/^sha256:/, '')} />
              </p>
              <p class="tool-names">
                {r.tools.map((t) => (
                  <code key={typeof t === 'string' ? t : t.name}>{typeof t === 'string' ? t : t.name}</code>
                ))}
              </p>
              {installedAs && <a href={href('h', installedAs.name)}>Open {installedAs.name}</a>}
            </li>
          );
        })}
      </ul>
    </section>
  );
}
