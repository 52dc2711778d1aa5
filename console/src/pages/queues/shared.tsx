import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { errorText } from '../../api.js';
import { confirmAction } from '../../confirm.js';

/** Pieces the job queue, message queue and webhook pages share. */

/** An epoch-seconds time as the browser's local date and time; '—' when absent. */
export function epochTime(seconds: number | null | undefined): string {
  return seconds === null || seconds === undefined ? '—' : new Date(seconds * 1000).toLocaleString();
}


/**
 * A button that runs an API action: disabled while it runs, the error shown beside it, and,
 * with `confirm`, the action runs only once the operator confirmed (every destructive one).
 */
export function ActionButton(props: {
  label: string;
  run: () => Promise<unknown>;
  confirm?: string;
  danger?: boolean;
  disabled?: boolean;
  done?: () => void;
  /** What the answer says, shown beside the button (e.g. "3 redriven"). */
  describe?: (answer: any) => string;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [said, setSaid] = useState<string | null>(null);
  async function click() {
    if (props.confirm && !(await confirmAction(props.confirm, props.label))) return;
    setBusy(true);
    setError(null);
    setSaid(null);
    try {
      const answer = await props.run();
      if (props.describe) setSaid(props.describe(answer));
      props.done?.();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }
  return (
    <span class="action">
      <button type="button" class={props.danger ? 'danger' : ''} disabled={busy || props.disabled} onClick={click}>
        {props.label}
      </button>
      {said && <span class="said" role="status">{said}</span>}
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}

/** A load error, or "Loading…" before the first answer. */
export function LoadState({ error, loading }: { error: unknown; loading: boolean }) {
  if (error) return <p class="error" role="alert">{errorText(error)}</p>;
  return loading ? <p>Loading…</p> : null;
}

/** JSON shown as it is, indented (payloads, bodies, headers). */
export function Json({ value }: { value: unknown }) {
  return <pre class="json">{typeof value === 'string' ? value : JSON.stringify(value, null, 2)}</pre>;
}

export function Section({ title, children }: { title: string; children: ComponentChildren }) {
  return (
    <section aria-label={title}>
      <h2>{title}</h2>
      {children}
    </section>
  );
}
