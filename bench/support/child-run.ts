import { fork } from 'node:child_process';

/**
 * A load generator in its own process, so it never shares a process (or an
 * event loop) with a server it measures. The parent forks the module that
 * calls serveInChild, sends it the plan and waits for its one answer; a child
 * silent for `timeout_ms` is killed.
 */
type ChildMessage<Result> = { result: Result; cpu_seconds: number } | { error: string };

/**
 * What the parent learns when the child is done. `cpu_seconds` is the
 * child's own CPU time (all its threads) from fork to its answer: by the time
 * the parent hears of the exit, /proc no longer has the process, so a CPU
 * meter reading it there would count nothing for it.
 */
export interface ChildDone {
  cpu_seconds: number;
}

export function runInChild<Plan, Result>(
  modulePath: string,
  plan: Plan,
  timeout_ms: number,
  label: string,
  onStart?: (pid: number) => void,
  onDone?: (done: ChildDone) => void,
): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = fork(modulePath, ['--child'], { stdio: ['ignore', 2, 2, 'ipc'] });
    if (child.pid) onStart?.(child.pid);
    let answer: ChildMessage<Result> | undefined;
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout_ms);
    child.on('message', (message: ChildMessage<Result>) => (answer = message));
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (answer && 'result' in answer) {
        onDone?.({ cpu_seconds: answer.cpu_seconds });
        resolve(answer.result);
      } else if (answer && 'error' in answer) reject(new Error(answer.error));
      else reject(new Error(`${label} exited with ${signal ?? `code ${code}`} and no result`));
    });
    child.send(plan as object);
  });
}

/** The child's side: when this process was forked by runInChild, runs the plan it is sent and answers once. */
export function serveInChild<Plan, Result>(run: (plan: Plan) => Promise<Result>): void {
  if (process.argv[2] !== '--child' || !process.send) return;
  process.once('message', (plan: Plan) => {
    run(plan).then(
      (result) => {
        const { user, system } = process.cpuUsage();
        process.send!({ result, cpu_seconds: (user + system) / 1e6 } satisfies ChildMessage<Result>, () => process.exit(0));
      },
      (error: unknown) => process.send!({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) } satisfies ChildMessage<Result>, () => process.exit(1)),
    );
  });
}
