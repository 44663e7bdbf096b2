/** Small shared pieces of the views: copy button, status chip, error box, confirm dialog. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/** A button that copies `text` and says so (in a live region). */
export function CopyButton(props: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  const copy = async (): Promise<void> => {
    try {
      await navigator.clipboard.writeText(props.text);
    } catch {
      // no clipboard permission: select the text in a temporary field instead
      const t = document.createElement('textarea');
      t.value = props.text;
      document.body.append(t);
      t.select();
      document.execCommand('copy');
      t.remove();
    }
    setDone(true);
    setTimeout(() => setDone(false), 1500);
  };
  return (
    <button type="button" class="ghost" onClick={() => void copy()} title={props.text} data-copy={props.text}>
      <span aria-live="polite">{done ? 'Copied' : props.label}</span>
    </button>
  );
}

/** An outcome or status as a coloured chip. */
export function Chip(props: { kind: string; children?: ComponentChildren }) {
  return <span class={`chip chip-${props.kind}`}>{props.children ?? props.kind}</span>;
}

/** The first 12 hex digits of a digest, full digest on hover. */
export function Digest(props: { value: string }) {
  return (
    <code class="digest" title={props.value}>
      {props.value.slice(0, 12)}
    </code>
  );
}

/** An error the daemon gave, verbatim. */
export function ErrorBox(props: { message: string | null }) {
  if (!props.message) return null;
  return (
    <pre class="error-box" role="alert">
      {props.message}
    </pre>
  );
}

/** A modal confirmation (the native dialog: focus kept inside, Escape cancels). */
export function Confirm(props: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirm: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onClose={props.onCancel} class="card">
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div class="row end">
        <button type="button" class="ghost" onClick={props.onCancel} autofocus>
          Cancel
        </button>
        <button type="button" class="danger" onClick={props.onConfirm}>
          {props.confirm}
        </button>
      </div>
    </dialog>
  );
}

/** Elapsed time from `since` (ms since the epoch) as "3 s ago"/"in 2 min". */
export function relative(ms: number, now = Date.now()): string {
  const d = ms - now;
  const a = Math.abs(d);
  const text =
    a < 1000
      ? `${a} ms`
      : a < 60_000
        ? `${Math.round(a / 1000)} s`
        : a < 3_600_000
          ? `${Math.round(a / 60_000)} min`
          : `${Math.round(a / 3_600_000)} h`;
  return d >= 0 ? `in ${text}` : `${text} ago`;
}
