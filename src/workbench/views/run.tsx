/**
 * Run: a tool's arguments from the generated form or as raw JSON, the call streamed (each berm.log
 * line shown as it comes), and a transcript of this page's calls, newest first: done / failed /
 * trap (with a link to its guest pc in the Code view) / refused / error, with the elapsed ms.
 */
import { useState } from 'preact/hooks';
import { ApiError, invokeStreamed } from '../api';
import { href } from '../router';
import { useStore } from '../state';
import {
  argsToValues,
  formable,
  initialValues,
  SchemaForm,
  valuesToArgs,
  type FieldValues,
  type Schema,
} from './schema-form';
import { Chip, ErrorBox } from './ui';

/** One call in the transcript. */
interface Entry {
  id: number;
  harness: string;
  tool: string;
  args: string;
  kind: 'done' | 'failed' | 'trap' | 'refused' | 'error';
  text: string;
  logs: string[];
  ms: number;
  at: number;
  pc?: number;
}

const transcript: Entry[] = [];
let nextId = 1;

function entryOf(status: number, reply: Record<string, unknown>): Pick<Entry, 'kind' | 'text' | 'pc'> {
  if ('done' in reply) return { kind: 'done', text: String(reply.done) };
  if ('failed' in reply) return { kind: 'failed', text: String(reply.failed) };
  if (typeof reply.trap === 'string')
    return {
      kind: 'trap',
      text: String(reply.error),
      ...(typeof reply.pc === 'number' ? { pc: reply.pc } : {}),
    };
  return { kind: status === 429 ? 'refused' : 'error', text: String(reply.error ?? JSON.stringify(reply)) };
}

export function RunView(props: { harness: string; tool: string }) {
  const store = useStore();
  const h = store.harnesses.get(props.harness);
  const tool = h?.tools.find((t) => t.name === props.tool);
  const schema = (tool?.parameters ?? {}) as Schema;
  const canForm = formable(schema);
  const [raw, setRaw] = useState(!canForm);
  const [values, setValues] = useState<FieldValues>(() => (canForm ? initialValues(schema) : {}));
  const [text, setText] = useState('{}');
  const [running, setRunning] = useState(false);
  const [logs, setLogs] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [, redraw] = useState(0);

  if (!h || !tool) {
    return (
      <section>
        <h1>
          {props.harness}.{props.tool}
        </h1>
        <p>{store.loaded ? 'No such tool is deployed.' : 'Loading…'}</p>
        <a href={href('h', props.harness)}>Back</a>
      </section>
    );
  }

  const toggle = (): void => {
    setError(null);
    if (!raw) {
      try {
        setText(JSON.stringify(valuesToArgs(schema, values), null, 2));
        setRaw(true);
      } catch (e) {
        setError((e as Error).message);
      }
    } else {
      try {
        const a = JSON.parse(text) as unknown;
        if (typeof a !== 'object' || a === null || Array.isArray(a))
          throw new Error('the arguments must be a JSON object for the form');
        setValues(argsToValues(schema, a as Record<string, unknown>));
        setRaw(false);
      } catch (e) {
        setError((e as Error).message);
      }
    }
  };

  const run = async (e: Event): Promise<void> => {
    e.preventDefault();
    setError(null);
    let args: string;
    try {
      args = raw ? (JSON.parse(text), text) : JSON.stringify(valuesToArgs(schema, values));
    } catch (err) {
      setError(raw ? `the arguments are not valid JSON: ${(err as Error).message}` : (err as Error).message);
      return;
    }
    setRunning(true);
    setLogs([]);
    const lines: string[] = [];
    const t0 = performance.now();
    let entry: Entry;
    try {
      const r = await invokeStreamed(h.name, tool.name, args, (line) => {
        lines.push(line);
        setLogs([...lines]);
      });
      entry = {
        id: nextId++,
        harness: h.name,
        tool: tool.name,
        args,
        logs: lines,
        ms: 0,
        at: Date.now(),
        ...entryOf(r.status, r.reply),
      };
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      entry = {
        id: nextId++,
        harness: h.name,
        tool: tool.name,
        args,
        logs: lines,
        ms: 0,
        at: Date.now(),
        kind: status === 429 ? 'refused' : 'error',
        text: (err as Error).message,
      };
    }
    entry.ms = Math.round(performance.now() - t0);
    transcript.unshift(entry);
    if (transcript.length > 200) transcript.length = 200;
    setRunning(false);
    redraw((n) => n + 1);
  };

  const mine = transcript.filter((t) => t.harness === h.name);
  return (
    <section class="run">
      <div class="view-head">
        <h1>
          <a href={href('h', h.name)}>{h.name}</a>.{tool.name}
        </h1>
      </div>
      <p class="description">{tool.description}</p>
      <form class="card" onSubmit={(e) => void run(e)} aria-label={`Arguments of ${tool.name}`}>
        <div class="row">
          <h2>Arguments</h2>
          <button type="button" class="ghost" onClick={toggle} aria-pressed={raw} disabled={!canForm}>
            Raw JSON
          </button>
        </div>
        {raw ? (
          <>
            <label for="raw-args">Arguments (JSON)</label>
            <textarea
              id="raw-args"
              rows={8}
              spellcheck={false}
              value={text}
              onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
            />
          </>
        ) : (
          <SchemaForm schema={schema} values={values} onChange={setValues} />
        )}
        <ErrorBox message={error} />
        <button class="primary" type="submit" disabled={running}>
          {running ? 'Running…' : 'Run'}
        </button>
      </form>
      {running && (
        <div class="card live-log" aria-live="polite">
          <h2>Log</h2>
          <ol class="log">
            {logs.map((l, i) => (
              <li key={i}>{l}</li>
            ))}
          </ol>
        </div>
      )}
      <h2>Transcript</h2>
      {mine.length === 0 ? (
        <p class="muted">No call yet.</p>
      ) : (
        <ol class="transcript" reversed>
          {mine.map((t) => (
            <li key={t.id} class={`card entry entry-${t.kind}`} data-kind={t.kind}>
              <div class="row">
                <Chip kind={t.kind} />
                <code>{t.tool}</code>
                <span class="muted">{t.ms} ms</span>
                <time class="muted" dateTime={new Date(t.at).toISOString()}>
                  {new Date(t.at).toLocaleTimeString()}
                </time>
                {t.pc !== undefined && t.pc >= 0 && (
                  <a class="pc-link" href={`${href('code', t.harness)}?pc=0x${t.pc.toString(16)}`}>
                    pc 0x{t.pc.toString(16)} in Code
                  </a>
                )}
              </div>
              <details>
                <summary>Arguments</summary>
                <pre>{t.args}</pre>
              </details>
              <pre class="result">{t.text}</pre>
              {t.logs.length > 0 && (
                <details>
                  <summary>
                    {t.logs.length} log line{t.logs.length === 1 ? '' : 's'}
                  </summary>
                  <ol class="log">
                    {t.logs.map((l, i) => (
                      <li key={i}>{l}</li>
                    ))}
                  </ol>
                </details>
              )}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
