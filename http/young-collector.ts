import v8 from 'node:v8';
import vm from 'node:vm';

type Collect = (options: { type: 'minor' | 'major'; execution?: 'sync' | 'async' }) => void;
let collect: Collect | null | undefined;

/**
 * Large uploads stream through the node in 64 KiB socket chunks, each written to disk and then
 * garbage. Their memory is freed only when V8 collects its young generation, which it does when
 * that generation is full (16 MiB semi-spaces by default): a 100 MiB upload would grow the node
 * by some 30 MiB of chunks already written. An upload calls `collectYoung()` every few MiB so the
 * growth stays bounded by that step, at the cost of a young-generation collection (about a
 * millisecond) per step, and only while uploads run.
 *
 * V8 exposes the collector only behind --expose-gc; the flag is set at first use and the
 * function read from a fresh context. Where that fails, nothing is collected early.
 */
export function collectYoung(): void {
  if (collect === undefined) {
    try {
      v8.setFlagsFromString('--expose-gc');
      collect = vm.runInNewContext('gc') as Collect;
    } catch {
      collect = null;
    }
  }
  collect?.({ type: 'minor' });
}
