import { useState } from 'preact/hooks';
import { api, errorText } from '../../api.js';
import { confirmAction } from '../../confirm.js';
import type { ClusterView } from './types.js';

interface DrainRequest {
  node_id: string;
  requested_at: string;
}

/** The members, with what each leads and follows, and the drain action (POST /admin/cluster/nodes/{node_id}/drain). */
export function Members({ view }: { view: ClusterView }) {
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string } | undefined>(undefined);
  const [busy, setBusy] = useState<string | undefined>(undefined);

  async function drain(nodeId: string) {
    const confirmed = await confirmAction(
      `Drain ${nodeId}? It hands every partition it leads over to the other nodes and stays up, empty, until it is restarted.`,
      `Drain ${nodeId}`,
    );
    if (!confirmed) return;
    setBusy(nodeId);
    try {
      const request = await api<DrainRequest>('POST', `/admin/cluster/nodes/${encodeURIComponent(nodeId)}/drain`);
      setOutcome({ ok: true, text: `Drain of ${request.node_id} requested at ${new Date(request.requested_at).toLocaleTimeString()}: watch its partitions move.` });
    } catch (error) {
      const text = errorText(error);
      setOutcome({ ok: false, text });
    } finally {
      setBusy(undefined);
    }
  }

  return (
    <section>
      <h2>Nodes</h2>
      <table aria-label="Nodes">
        <thead>
          <tr>
            <th>Node</th>
            <th>HTTP</th>
            <th>State</th>
            <th>View of etcd</th>
            <th>Leads</th>
            <th>Follows</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {view.members.map((m) => (
            <tr key={m.node_id}>
              <td>
                <strong>{m.node_id}</strong>
                {m.node_id === view.node_id ? ' (this node)' : ''}
              </td>
              <td>{m.http_url}</td>
              <td>{m.draining ? 'draining' : 'serving'}</td>
              <td>{view.mode === 'embedded' ? 'no etcd' : m.view_fresh ? 'fresh' : 'stale'}</td>
              <td>{m.leads}</td>
              <td>{m.follows}</td>
              <td>
                <button type="button" class="danger" disabled={m.draining || busy !== undefined} onClick={() => drain(m.node_id)}>
                  Drain
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {outcome ? (
        <p role={outcome.ok ? 'status' : 'alert'} class={outcome.ok ? '' : 'error'}>
          {outcome.text}
        </p>
      ) : null}
    </section>
  );
}
