/**
 * Rounds per comparison in the write-path benches: BENCH_WRITE_PATH_ROUNDS,
 * default 3 (the hot-path issue's "median of three paired rounds"). More
 * rounds give a steadier median on a machine whose speed moves from one run
 * to the next; the runner's time bound for those files grows with them.
 */
export const WRITE_PATH_ROUNDS = Math.max(1, Math.floor(Number(process.env.BENCH_WRITE_PATH_ROUNDS ?? 3)) || 3);
