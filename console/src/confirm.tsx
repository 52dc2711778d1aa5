import { render } from 'preact';

/**
 * Asks before a destructive action: a modal <dialog> naming what will happen, answered by
 * "Confirm" or "Cancel" (Escape cancels). Resolves true only on "Confirm".
 */
export function confirmAction(message: string, confirmLabel = 'Confirm'): Promise<boolean> {
  return new Promise((resolve) => {
    const host = document.createElement('div');
    document.body.appendChild(host);
    const close = (answer: boolean) => {
      render(null, host);
      host.remove();
      resolve(answer);
    };
    render(
      <dialog
        class="confirm"
        open
        role="alertdialog"
        aria-label="Confirm action"
        onKeyDown={(event) => event.key === 'Escape' && close(false)}
      >
        <p>{message}</p>
        <div class="actions">
          <button type="button" onClick={() => close(false)}>
            Cancel
          </button>
          <button type="button" class="danger" onClick={() => close(true)}>
            {confirmLabel}
          </button>
        </div>
      </dialog>,
      host,
    );
  });
}
