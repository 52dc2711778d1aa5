import { fork } from 'node:child_process';

/**
 * A load generator in its own process, so it never shares a process (or an
 * event loop) with a server it measures. The parent forks the module that
 * calls serveInChild, sends it the plan and waits for its one answer; a child
 * silent for `timeout_ms` is killed.
 */
type ChildMessage<Result> = { result: Result } | { error: string };

export function runInChild<Plan, Result>(modulePath: string, plan: Plan, timeout_ms: number, label: string, onStart?: (pid: number) => void): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = fork(modulePath, ['--child'], { stdio: ['ignore', 2, 2, 'ipc'] });
    if (child.pid) onStart?.(child.pid);
    let answer: ChildMessage<Result> | undefined;
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout_ms);
    child.on('message', (message: ChildMessage<Result>) => (answer = message));
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (answer && 'result' in answer) resolve(answer.result);
      else if (answer && 'error' in answer) reject(new Error(answer.error));
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
      (result) => process.send!({ result } satisfies ChildMessage<Result>, () => process.exit(0)),
      (error: unknown) => process.send!({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) } satisfies ChildMessage<Result>, () => process.exit(1)),
    );
  });
}
