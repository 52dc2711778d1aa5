import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import { query } from '../users/format.js';
import { errorText } from '../../api.js';

interface Anomaly {
  timestamp_ms: number;
  latency_ms: number;
  mean_ms: number;
  std_dev_ms: number;
  z_score: number;
  direction: 'high' | 'low';
}
interface Entity {
  entity_id: string;
  alive: boolean;
  last_seen_ms: number;
  uptime: number;
  labels: Record<string, string>;
  anomaly_count: number;
  anomalies: Anomaly[];
}

const LIMIT = 100;

/**
 * A tenant's liveness entities (GET /admin/liveness, the first 100 by entity_id, optionally only
 * dead ones), with 24 h uptime and their latest latency anomalies, every 5 s.
 */
export function LivenessSection({ tenant }: { tenant: string }) {
  const [deadOnly, setDeadOnly] = useState(false);
  const [open, setOpen] = useState<string | null>(null);
  const entities = useLoad(
    () => api<{ entities: Entity[]; total_matched: number }>('GET', `/admin/liveness${query({ tenant, limit: LIMIT, alive: deadOnly ? false : undefined })}`),
    [tenant, deadOnly],
    5000,
  );
  return (
    <section aria-label="Liveness">
      <h2>Liveness entities</h2>
      <label class="inline">
        <input type="checkbox" checked={deadOnly} onChange={(e) => setDeadOnly(e.currentTarget.checked)} /> Dead only
      </label>
      {entities.error && (
        <p class="error" role="alert">
          {errorText(entities.error)}
        </p>
      )}
      {entities.data && entities.data.entities.length === 0 && <p class="empty">No entity.</p>}
      {entities.data && entities.data.entities.length > 0 && (
        <>
          {entities.data.total_matched > LIMIT && (
            <p>
              The first {LIMIT} of {entities.data.total_matched}, by id.
            </p>
          )}
          <table aria-label="Liveness entities">
            <thead>
              <tr>
                <th>Entity</th>
                <th>Status</th>
                <th>Last seen</th>
                <th>Uptime (24 h)</th>
                <th>Labels</th>
                <th>Anomalies</th>
              </tr>
            </thead>
            <tbody>
              {entities.data.entities.map((entity) => (
                <Fragment key={entity.entity_id}>
                  <tr>
                    <td>
                      <code>{entity.entity_id}</code>
                    </td>
                    <td>{entity.alive ? <span class="badge">alive</span> : <span class="badge bad">dead</span>}</td>
                    <td>{new Date(entity.last_seen_ms).toLocaleString()}</td>
                    <td>{entity.uptime.toFixed(2)} %</td>
                    <td>
                      {Object.entries(entity.labels)
                        .map(([name, value]) => `${name}=${value}`)
                        .join(', ')}
                    </td>
                    <td>
                      {entity.anomaly_count === 0 ? (
                        '0'
                      ) : (
                        <button type="button" onClick={() => setOpen(open === entity.entity_id ? null : entity.entity_id)}>
                          {entity.anomaly_count} {open === entity.entity_id ? '(hide)' : '(show)'}
                        </button>
                      )}
                    </td>
                  </tr>
                  {open === entity.entity_id && (
                    <tr>
                      <td colSpan={6}>
                        <table aria-label={`Anomalies of ${entity.entity_id}`}>
                          <thead>
                            <tr>
                              <th>When</th>
                              <th>Latency</th>
                              <th>Mean</th>
                              <th>Std dev</th>
                              <th>z</th>
                              <th>Direction</th>
                            </tr>
                          </thead>
                          <tbody>
                            {entity.anomalies.map((anomaly) => (
                              <tr key={anomaly.timestamp_ms}>
                                <td>{new Date(anomaly.timestamp_ms).toLocaleString()}</td>
                                <td>{anomaly.latency_ms} ms</td>
                                <td>{anomaly.mean_ms} ms</td>
                                <td>{anomaly.std_dev_ms} ms</td>
                                <td>{anomaly.z_score}</td>
                                <td>{anomaly.direction}</td>
                              </tr>
                            ))}
                          </tbody>
                        </table>
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
