/**
 * A form generated from a tool's JSON Schema: one field per property of an object schema, typed
 * (text, number, integer, checkbox; an enum as a select; anything structured as a JSON text area),
 * required ones marked, each property's description as its hint.
 */
import { useId } from 'preact/hooks';

/** The part of JSON Schema the form reads. */
export interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  enum?: unknown[];
  description?: string;
  title?: string;
  default?: unknown;
}

/** What a field holds while edited: the raw text (or a boolean for a checkbox). */
export type FieldValues = Record<string, string | boolean>;

function kind(s: Schema): 'enum' | 'string' | 'number' | 'integer' | 'boolean' | 'json' {
  if (Array.isArray(s.enum)) return 'enum';
  const t = Array.isArray(s.type) ? s.type.filter((x) => x !== 'null') : s.type;
  const one = Array.isArray(t) ? (t.length === 1 ? t[0] : undefined) : t;
  if (one === 'string' || one === 'number' || one === 'integer' || one === 'boolean') return one;
  return 'json';
}

/** Whether a schema can be shown as a form (an object with properties). */
export function formable(s: unknown): s is Schema & { properties: Record<string, Schema> } {
  return typeof s === 'object' && s !== null && typeof (s as Schema).properties === 'object';
}

/** Initial field values: the defaults. */
export function initialValues(s: Schema): FieldValues {
  const out: FieldValues = {};
  for (const [k, p] of Object.entries(s.properties ?? {})) {
    const k2 = kind(p);
    if (k2 === 'boolean') out[k] = p.default === true;
    else if (p.default !== undefined) out[k] = k2 === 'json' ? JSON.stringify(p.default) : String(p.default);
    else if (k2 === 'enum' && (s.required ?? []).includes(k)) out[k] = JSON.stringify(p.enum![0]);
    else out[k] = '';
  }
  return out;
}

/**
 * The arguments the fields describe. Empty optional fields are left out.
 * @throws Error naming the field whose text is not a number or not JSON
 */
export function valuesToArgs(s: Schema, v: FieldValues): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const required = new Set(s.required ?? []);
  for (const [k, p] of Object.entries(s.properties ?? {})) {
    const raw = v[k];
    const k2 = kind(p);
    if (k2 === 'boolean') {
      if (raw === true || required.has(k)) out[k] = raw === true;
      continue;
    }
    const text = typeof raw === 'string' ? raw : '';
    if (text === '' && !required.has(k)) continue;
    if (k2 === 'string') out[k] = text;
    else if (k2 === 'number' || k2 === 'integer') {
      const n = Number(text);
      if (text.trim() === '' || !Number.isFinite(n)) throw new Error(`${k}: not a number`);
      out[k] = n;
    } else if (k2 === 'enum') out[k] = JSON.parse(text);
    else {
      try {
        out[k] = JSON.parse(text);
      } catch {
        throw new Error(`${k}: not valid JSON`);
      }
    }
  }
  return out;
}

/** Field values from an arguments object (for the raw-JSON → form switch). */
export function argsToValues(s: Schema, a: Record<string, unknown>): FieldValues {
  const out = initialValues(s);
  for (const [k, p] of Object.entries(s.properties ?? {})) {
    if (!(k in a)) continue;
    const k2 = kind(p);
    const val = a[k];
    if (k2 === 'boolean') out[k] = val === true;
    else if (k2 === 'string' && typeof val === 'string') out[k] = val;
    else if ((k2 === 'number' || k2 === 'integer') && typeof val === 'number') out[k] = String(val);
    else out[k] = JSON.stringify(val);
  }
  return out;
}

export function SchemaForm(props: {
  schema: Schema;
  values: FieldValues;
  onChange: (v: FieldValues) => void;
}) {
  const base = useId();
  const required = new Set(props.schema.required ?? []);
  const entries = Object.entries(props.schema.properties ?? {});
  if (entries.length === 0) return <p class="muted">This tool takes no arguments.</p>;
  const set = (k: string, v: string | boolean): void => props.onChange({ ...props.values, [k]: v });
  return (
    <div class="fields">
      {entries.map(([k, p]) => {
        const id = `${base}-${k}`;
        const hint = p.description ? `${id}-hint` : undefined;
        const k2 = kind(p);
        const req = required.has(k);
        const label = (
          <label for={id}>
            {k}
            {req && (
              <span class="req" title="required">
                {' '}
                *
              </span>
            )}
            <span class="type">
              {' '}
              {k2 === 'json' ? (Array.isArray(p.type) ? p.type.join('|') : (p.type ?? 'JSON')) : k2}
            </span>
          </label>
        );
        let input;
        if (k2 === 'boolean')
          input = (
            <input
              id={id}
              type="checkbox"
              checked={props.values[k] === true}
              aria-describedby={hint}
              onChange={(e) => set(k, (e.target as HTMLInputElement).checked)}
            />
          );
        else if (k2 === 'enum')
          input = (
            <select
              id={id}
              required={req}
              aria-describedby={hint}
              value={String(props.values[k] ?? '')}
              onChange={(e) => set(k, (e.target as HTMLSelectElement).value)}
            >
              {!req && <option value="">(none)</option>}
              {p.enum!.map((o) => (
                <option key={JSON.stringify(o)} value={JSON.stringify(o)}>
                  {typeof o === 'string' ? o : JSON.stringify(o)}
                </option>
              ))}
            </select>
          );
        else if (k2 === 'json')
          input = (
            <textarea
              id={id}
              rows={3}
              required={req}
              aria-describedby={hint}
              spellcheck={false}
              value={String(props.values[k] ?? '')}
              onInput={(e) => set(k, (e.target as HTMLTextAreaElement).value)}
            />
          );
        else if (k2 === 'string')
          input = (
            <input
              id={id}
              type="text"
              required={req}
              aria-describedby={hint}
              value={String(props.values[k] ?? '')}
              onInput={(e) => set(k, (e.target as HTMLInputElement).value)}
            />
          );
        else
          input = (
            <input
              id={id}
              type="number"
              step={k2 === 'integer' ? 1 : 'any'}
              required={req}
              aria-describedby={hint}
              value={String(props.values[k] ?? '')}
              onInput={(e) => set(k, (e.target as HTMLInputElement).value)}
            />
          );
        return (
          <div class={`field field-${k2}`} key={k}>
            {label}
            {input}
            {hint && (
              <p class="hint" id={hint}>
                {p.description}
              </p>
            )}
          </div>
        );
      })}
    </div>
  );
}
