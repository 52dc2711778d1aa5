import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import { query, type Pagination } from '../users/format.js';
import { errorText } from '../../api.js';
import { Pager } from '../users/pager.js';

interface Room {
  room_id: string;
  status: string;
  capacity: number;
  auto_admit: boolean;
  admission_rate: { batch_size: number; interval_seconds: number };
  statistics: { active_count: number; waiting_count: number; total_admitted: number; average_wait_seconds: number; current_admission_rate: number };
}

/** A tenant's waiting rooms with their live statistics (GET /admin/waiting-rooms), every 5 s. */
export function WaitingRoomsSection({ tenant }: { tenant: string }) {
  const [page, setPage] = useState(1);
  const rooms = useLoad(() => api<{ pagination: Pagination; rooms: Room[] }>('GET', `/admin/waiting-rooms${query({ tenant, page, page_size: 50 })}`), [tenant, page], 5000);
  return (
    <section aria-label="Waiting rooms">
      <h2>Waiting rooms</h2>
      {rooms.error && (
        <p class="error" role="alert">
          {errorText(rooms.error)}
        </p>
      )}
      {rooms.data && rooms.data.rooms.length === 0 && <p class="empty">This tenant has no waiting room.</p>}
      {rooms.data && rooms.data.rooms.length > 0 && (
        <table aria-label="Waiting rooms">
          <thead>
            <tr>
              <th>Room</th>
              <th>Status</th>
              <th>Waiting (length)</th>
              <th>Active / capacity</th>
              <th>Admitted (total)</th>
              <th>Admission rate (observed)</th>
              <th>Configured rate</th>
              <th>Average wait</th>
            </tr>
          </thead>
          <tbody>
            {rooms.data.rooms.map((room) => (
              <tr key={room.room_id}>
                <td>
                  <code>{room.room_id}</code>
                </td>
                <td>
                  {room.status}
                  {room.auto_admit ? '' : ' (manual admission)'}
                </td>
                <td data-testid={`waiting-${room.room_id}`}>{room.statistics.waiting_count}</td>
                <td>
                  {room.statistics.active_count} / {room.capacity}
                </td>
                <td>{room.statistics.total_admitted}</td>
                <td>{(room.statistics.current_admission_rate * 60).toFixed(1)} / min</td>
                <td>
                  {room.admission_rate.batch_size} every {room.admission_rate.interval_seconds} s
                </td>
                <td>{Math.round(room.statistics.average_wait_seconds)} s</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager pagination={rooms.data?.pagination} onPage={setPage} />
    </section>
  );
}
