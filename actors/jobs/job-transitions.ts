import { assert } from '../../runtime/index.js';
import type { JobStatus } from './messages.js';

/**
 * The job state machine (docs/api/jobs.md, "Job states"), one table:
 *
 *   scheduled  -> processing   due, queue active, a concurrency slot free
 *   scheduled  -> cancelled    DELETE /jobs/{id}, cancel-bulk (also a job parked between retries)
 *   processing -> completed    the target answered 2xx
 *   processing -> scheduled    a failed attempt with attempts left: parked until its retry time
 *   processing -> failed       attempts exhausted, or the delivery guard refused the target
 *   failed     -> scheduled    DLQ redrive (attempts start again from 0)
 *
 * completed and cancelled are final (cleanup removes them after retention).
 * Callers check the user-facing rule first (a ServiceError: cancelling a
 * job in processing is 409 job_not_cancellable); a move outside the table
 * is a defect, so it is an assertion.
 */
export const JOB_TRANSITIONS: Readonly<Record<JobStatus, readonly JobStatus[]>> = {
  scheduled: ['processing', 'cancelled'],
  processing: ['completed', 'scheduled', 'failed'],
  completed: [],
  failed: ['scheduled'],
  cancelled: [],
};

export function canMove(from: JobStatus, to: JobStatus): boolean {
  return JOB_TRANSITIONS[from].includes(to);
}

export function assertMove(from: JobStatus, to: JobStatus): void {
  assert(canMove(from, to), `illegal job transition ${from} -> ${to}`);
}

export const TERMINAL_STATUSES: readonly JobStatus[] = ['completed', 'failed', 'cancelled'];
