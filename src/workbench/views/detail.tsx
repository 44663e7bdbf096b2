/**
 * Harness detail: usage, each tool with its MCP name `{harness}.{tool}`, description and schema
 * (collapsible), the capabilities its manifest requests against those the operator granted, and
 * removal behind a confirmation. Every text of the manifest is rendered as text, never as markup.
 */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { go, href } from '../router';
import { dropHarness, useStore } from '../state';
import { Confirm, CopyButton, ErrorBox } from './ui';

export function DetailView(props: { name: string }) {
  const store = useStore();
  const h = store.harnesses.get(props.name);
  const [confirm, setConfirm] = useState(false);
  const [error, setError] = useState<string | null>(null);
  if (!h) {
    return (
      <section>
        <h1>{props.name}</h1>
        <p>{store.loaded ? 'No harness of that name is deployed.' : 'Loading…'}</p>
        <a href="#/">Back to the harnesses</a>
      </section>
    );
  }
  const requested = [...h.deps].sort();
  const granted = h.granted.capabilities;
  const caps = [...new Set([...requested, ...granted])].sort();
  const remove = async (): Promise<void> => {
    setConfirm(false);
    try {
      await api('DELETE', `/harnesses/${encodeURIComponent(h.name)}`);
      dropHarness(h.name);
      go('#/');
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <section>
      <div class="view-head">
        <h1>{h.name}</h1>
        <code class="digest" title="sha256 of the ELF">
          {h.digest.slice(0, 16)}…
        </code>
        <button type="button" class="danger" onClick={() => setConfirm(true)}>
          Remove
        </button>
      </div>
      <p class="usage">{h.usage}</p>
      <ErrorBox message={error} />
      <h2>Tools</h2>
      <ul class="tools">
        {h.tools.map((t) => (
          <li class="card tool" key={t.name} data-tool={t.name}>
            <div class="row">
              <code class="mcp-name">{`${h.name}.${t.name}`}</code>
              <CopyButton text={`${h.name}.${t.name}`} label="Copy name" />
              <a class="button primary" href={href('h', h.name, 'run', t.name)}>
                Run
              </a>
            </div>
            <p class="description">{t.description}</p>
            <details>
              <summary>Schema</summary>
              <pre class="schema">{JSON.stringify(t.parameters, null, 2)}</pre>
            </details>
          </li>
        ))}
      </ul>
      <h2>Capabilities</h2>
      {caps.length === 0 ? (
        <p class="muted">None requested, none granted.</p>
      ) : (
        <table class="caps">
          <thead>
            <tr>
              <th scope="col">Capability</th>
              <th scope="col">Requested</th>
              <th scope="col">Granted</th>
            </tr>
          </thead>
          <tbody>
            {caps.map((c) => (
              <tr key={c}>
                <th scope="row">
                  <code>{c}</code>
                </th>
                <td>{requested.includes(c) ? 'yes' : '—'}</td>
                <td class={granted.includes(c) ? 'ok' : requested.includes(c) ? 'warn' : ''}>
                  {granted.includes(c) ? 'granted' : 'not granted'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p class="row">
        <a href={href('code', h.name)}>Translated code</a>
      </p>
      <Confirm
        open={confirm}
        title={`Remove ${h.name}?`}
        confirm="Remove"
        onConfirm={() => void remove()}
        onCancel={() => setConfirm(false)}
      >
        <p>Its tools disappear from MCP and HTTP at once; calls in flight finish.</p>
      </Confirm>
    </section>
  );
}
