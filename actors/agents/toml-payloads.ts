import { parse, TomlError } from 'smol-toml';

/**
 * The agent's configuration payloads are TOML documents (agent, compaction,
 * intent, memory, rag, shield). They are stored as the client wrote them, but
 * only when they parse: a syntax error is refused with the field, line and
 * column, so a client never stores a definition its agents cannot load.
 * The parser is smol-toml (TOML 1.0.0).
 */
export interface TomlProblem {
  field: string;
  line: number | null;
  column: number | null;
  message: string;
}

/** null when `text` is a valid TOML document (an empty string is one). */
export function checkToml(field: string, text: string): TomlProblem | null {
  try {
    parse(text);
    return null;
  } catch (error) {
    if (error instanceof TomlError) {
      // The library's message repeats the excerpt after a blank line: keep the first line.
      const reason = error.message.split('\n')[0].replace(/^Invalid TOML document: /, '');
      return { field, line: error.line ?? null, column: error.column ?? null, message: reason };
    }
    // Deeply nested input can exhaust the parser's stack: refuse it like any invalid document.
    if (error instanceof RangeError) return { field, line: null, column: null, message: 'document nested too deeply' };
    throw error;
  }
}
