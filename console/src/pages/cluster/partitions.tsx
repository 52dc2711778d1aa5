import type { ClusterView } from './types.js';

/** Every partition: its leader, epoch, in-sync replicas, and the leader's followers with their lag. */
export function Partitions({ view }: { view: ClusterView }) {
  const leaderless = view.partitions.filter((p) => p.leader === null).length;
  return (
    <section>
      <h2>Partitions</h2>
      <p>
        {view.partitions.length} partitions
        {leaderless > 0 ? <strong class="error">, {leaderless} without a leader</strong> : ', every one with a leader'}.
      </p>
      <table aria-label="Partitions">
        <thead>
          <tr>
            <th>Partition</th>
            <th>Leader</th>
            <th>Epoch</th>
            <th>In-sync replicas</th>
            <th>Followers (lag in entries)</th>
          </tr>
        </thead>
        <tbody>
          {view.partitions.map((p) => (
            <tr key={p.partition}>
              <td>{p.partition}</td>
              <td>{p.leader ?? <strong class="error">none</strong>}</td>
              <td>{p.epoch ?? '-'}</td>
              <td>{p.isr.join(', ')}</td>
              <td>
                {p.followers.length === 0
                  ? '-'
                  : p.followers.map((f) => `${f.node_id} ${f.mode === 'in_sync' ? 'in sync' : 'catching up'} (lag ${f.lag ?? '?'})`).join(', ')}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
