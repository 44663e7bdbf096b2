/**
 * Deploy: an ELF from a file picker or dropped on the page, or an OCI reference the daemon pulls.
 * The name is prefilled from the file name; progress shows the upload, then the translation; a
 * refusal (the ELF reader's, the manifest's, a bound's) is shown as the daemon wrote it.
 */
import { useState } from 'preact/hooks';
import { api, deployElf } from '../api';
import { go, href } from '../router';
import { putHarness, type Harness } from '../state';
import { ErrorBox } from './ui';

/** A harness name from a file name: lowercase, `[a-z0-9_-]`, at most 64 characters. */
export function nameFromFile(file: string): string {
  return file
    .replace(/\.[^.]*$/, '')
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64);
}

type Progress =
  | { phase: 'idle' }
  | { phase: 'upload'; fraction: number }
  | { phase: 'translate' }
  | { phase: 'done'; name: string };

export function DeployView() {
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState('');
  const [reference, setReference] = useState('');
  const [refName, setRefName] = useState('');
  const [progress, setProgress] = useState<Progress>({ phase: 'idle' });
  const [error, setError] = useState<string | null>(null);
  const [over, setOver] = useState(false);
  const busy = progress.phase === 'upload' || progress.phase === 'translate';

  const pick = (f: File | undefined): void => {
    if (!f) return;
    setFile(f);
    setName(nameFromFile(f.name));
    setError(null);
    setProgress({ phase: 'idle' });
  };

  const deploy = async (e: Event): Promise<void> => {
    e.preventDefault();
    if (!file) return;
    setError(null);
    setProgress({ phase: 'upload', fraction: 0 });
    try {
      const h = await deployElf(name, file, (f) =>
        setProgress(f >= 1 ? { phase: 'translate' } : { phase: 'upload', fraction: f }),
      );
      putHarness(h as unknown as Harness);
      setProgress({ phase: 'done', name });
    } catch (err) {
      setError((err as Error).message);
      setProgress({ phase: 'idle' });
    }
  };

  const pull = async (e: Event): Promise<void> => {
    e.preventDefault();
    setError(null);
    setProgress({ phase: 'translate' });
    try {
      await api('POST', '/index/install', { reference, name: refName });
      setProgress({ phase: 'done', name: refName });
    } catch (err) {
      setError((err as Error).message);
      setProgress({ phase: 'idle' });
    }
  };

  return (
    <section>
      <div class="view-head">
        <h1>Deploy</h1>
      </div>
      <div class="grid2">
        <form class="card" onSubmit={(e) => void deploy(e)}>
          <h2>From an ELF file</h2>
          <div
            class={`drop ${over ? 'over' : ''}`}
            onDragOver={(e) => {
              e.preventDefault();
              setOver(true);
            }}
            onDragLeave={() => setOver(false)}
            onDrop={(e) => {
              e.preventDefault();
              setOver(false);
              pick(e.dataTransfer?.files[0]);
            }}
            data-testid="drop"
          >
            <p>
              {file ? `${file.name} · ${(file.size / 1024).toFixed(1)} KiB` : 'Drop a harness ELF here, or'}
            </p>
            <label class="button" for="elf">
              Choose a file
            </label>
            <input
              id="elf"
              class="sr-only"
              type="file"
              accept=".elf,application/octet-stream,application/x-elf"
              onChange={(e) => pick((e.target as HTMLInputElement).files?.[0])}
            />
          </div>
          <label for="deploy-name">Name</label>
          <input
            id="deploy-name"
            required
            pattern="[a-z0-9_\-]{1,64}"
            value={name}
            onInput={(e) => setName((e.target as HTMLInputElement).value)}
            aria-describedby="deploy-name-hint"
          />
          <p id="deploy-name-hint" class="hint">
            1 to 64 of a–z, 0–9, _ and -. An existing harness of that name is replaced.
          </p>
          <button class="primary" type="submit" disabled={!file || busy}>
            Deploy
          </button>
        </form>
        <form class="card" onSubmit={(e) => void pull(e)}>
          <h2>From an OCI reference</h2>
          <label for="oci-ref">Reference</label>
          <input
            id="oci-ref"
            required
            placeholder="127.0.0.1:5000/tools/echo:1.0"
            value={reference}
            onInput={(e) => {
              const v = (e.target as HTMLInputElement).value;
              setReference(v);
              const last = v.split('/').pop() ?? '';
              setRefName(nameFromFile(last.split(/[:@]/)[0] ?? ''));
            }}
          />
          <label for="oci-name">Name</label>
          <input
            id="oci-name"
            required
            pattern="[a-z0-9_\-]{1,64}"
            value={refName}
            onInput={(e) => setRefName((e.target as HTMLInputElement).value)}
          />
          <button class="primary" type="submit" disabled={busy || reference === ''}>
            Pull and deploy
          </button>
        </form>
      </div>
      <div class="progress-area" aria-live="polite">
        {progress.phase === 'upload' && (
          <div>
            <progress max={1} value={progress.fraction} aria-label="Upload" /> Uploading{' '}
            {Math.round(progress.fraction * 100)}%
          </div>
        )}
        {progress.phase === 'translate' && (
          <div class="translating">
            <progress aria-label="Translating" /> Translating to WebAssembly…
          </div>
        )}
        {progress.phase === 'done' && (
          <p class="ok">
            Deployed <a href={href('h', progress.name)}>{progress.name}</a>.{' '}
            <button type="button" class="ghost" onClick={() => go(href('h', progress.name))}>
              Open
            </button>
          </p>
        )}
      </div>
      <ErrorBox message={error} />
    </section>
  );
}
