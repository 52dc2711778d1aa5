import { Members } from './cluster/members.js';
import { Partitions } from './cluster/partitions.js';
import { useClusterStream } from './cluster/use-cluster-stream.js';

/**
 * The cluster, live: nodes and partitions as the node serving the console sees them, from the
 * server-sent event stream GET /admin/cluster/stream (a new view when it changes, at least every
 * 5 s). An embedded node shows itself as the one node, `embedded`.
 */
export function ClusterPage() {
  const { view, updatedAt, connected, error } = useClusterStream();
  return (
    <div class="cluster">
      <h1>Cluster</h1>
      <p class="live">
        <span class={connected ? 'dot on' : 'dot'} aria-hidden="true" />
        {connected ? 'Live' : 'Connecting...'}
        {updatedAt ? ` · updated ${updatedAt.toLocaleTimeString()}` : ''}
        {view ? ` · ${view.mode === 'embedded' ? 'embedded node (no etcd): one node leads every partition' : `cluster, as ${view.node_id} sees it`}` : ''}
      </p>
      {error ? (
        <p role="alert" class="error">
          {error.message}
        </p>
      ) : null}
      {view ? (
        <>
          <Members view={view} />
          <Partitions view={view} />
        </>
      ) : null}
    </div>
  );
}
