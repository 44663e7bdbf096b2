/**
 * Linear-time matching of a parameters schema's `pattern` (ECMA-262 syntax, as JSON Schema says).
 * Two engines, neither of which backtracks, so no pattern a guest declares can make validation
 * hang the host:
 *
 * 1. V8's linear-time engine (the RegExp `l` flag): exact ECMAScript semantics, but it refuses
 *    every construct it would have to unroll past a small size, such as a counted repetition above
 *    16 (`[a-z]{1,64}`, `{17}`), besides backreferences and lookaround.
 * 2. RE2 (the re2js package, a pure-JavaScript port of RE2: automata, no native build), for a
 *    pattern V8's engine refused. It takes counted repetitions up to 1000 within RE2's program-size
 *    limit, and refuses backreferences and lookaround (they have no linear-time matcher). The
 *    pattern is translated to RE2 syntax (`\uXXXX`, `[^]`, named groups) and `.`, `\s` and `\S`
 *    outside a class, `\s` inside one, are spelled out with ECMAScript's character sets so they
 *    mean what they mean in ECMAScript. What remains different: RE2 reads a string by code points,
 *    so `.` or a negated class matches a whole astral character where ECMAScript without `u`
 *    matches each half of its surrogate pair, and `\S` inside a class is RE2's ASCII complement.
 *
 * Patterns refused by both engines make the schema fail to compile (the harness is refused at load,
 * naming the construct).
 */
import { createRequire } from 'node:module';
import type { RE2JS as RE2JSType } from 're2js';

/** What ajv needs of a compiled pattern. */
export interface PatternMatcher {
  /** whether the pattern matches anywhere in `s` (as RegExp.prototype.test) */
  test(s: string): boolean;
  /** a key unique to pattern and engine, for ajv's cache */
  toString(): string;
}

let v8FlagSet = false;

/**
 * Compile `pattern` for ajv's `code.regExp` option: V8's linear-time engine when it can run the
 * pattern, else RE2. `flags` is ajv's (`u` or empty); neither engine takes `u` here, so patterns
 * match UTF-16 code units in V8's engine.
 * @throws SyntaxError naming the pattern when it is not a valid ECMAScript pattern, or when
 *   neither linear-time engine can run it (backreferences, lookaround, a repetition count over
 *   1000, a program over RE2's size limit); the message then contains "cannot be executed in
 *   linear time" and RE2's reason.
 */
export function schemaRegExp(pattern: string, flags: string): PatternMatcher {
  if (!v8FlagSet) {
    // The flag must be set before the first `l` RegExp is built. Set here, on first need, rather
    // than at load: node:v8 costs a CLI start ~2 ms, and a V8 flag changed at load would make every
    // code cache the CLI launcher produces mismatch V8's flag hash at the next start.
    const v8 = createRequire(import.meta.url)('node:v8') as typeof import('node:v8');
    v8.setFlagsFromString('--enable-experimental-regexp-engine');
    v8FlagSet = true;
  }
  try {
    return new RegExp(pattern, flags.replace('u', '') + 'l');
  } catch (e) {
    if (!/linear time/.test((e as Error).message)) throw e;
  }
  return re2Matcher(pattern);
}
schemaRegExp.code = 'schemaRegExp';

/** ECMAScript's WhiteSpace and LineTerminator code points (the `\s` set), as RE2 class members. */
const ECMA_SPACE =
  '\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}';

let re2js: typeof RE2JSType | null = null;

function re2Matcher(pattern: string): PatternMatcher {
  re2js ??= (createRequire(import.meta.url)('re2js') as { RE2JS: typeof RE2JSType }).RE2JS;
  let compiled: RE2JSType;
  try {
    compiled = re2js.compile(ecmaClasses(re2js.translateRegExp(pattern)));
  } catch (e) {
    const why = (e as Error).message.replace(/^error parsing regexp: /, '');
    throw new SyntaxError(
      `Invalid regular expression: /${pattern}/: cannot be executed in linear time (${why})`,
    );
  }
  const key = `re2:/${pattern}/`;
  return { test: (s: string) => compiled.test(s), toString: () => key };
}

/**
 * `p` (RE2 syntax) with `.`, `\s`, `\S` outside a class and `\s` inside one replaced by
 * ECMAScript's sets. Walks escapes and classes so that `\.` or `[.]` stay literal.
 */
export function ecmaClasses(p: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    if (c === '\\' && i + 1 < p.length) {
      const n = p[i + 1]!;
      i++;
      if (n === 's') out += inClass ? ECMA_SPACE : `[${ECMA_SPACE}]`;
      else if (n === 'S' && !inClass) out += `[^${ECMA_SPACE}]`;
      else if (n === 'Q' || n === 'x' || n === 'p' || n === 'P') {
        // \Q...\E and braced escapes pass through whole, so their contents are not read as syntax
        const end = n === 'Q' ? p.indexOf('\\E', i) : p[i + 1] === '{' ? p.indexOf('}', i) : i;
        const stop = end < 0 ? p.length - 1 : n === 'Q' ? end + 1 : end;
        out += '\\' + p.slice(i, stop + 1);
        i = stop;
      } else out += '\\' + n;
    } else if (c === '[' && !inClass) {
      inClass = true;
      out += c;
      // a `]` or `^]` right after the opening bracket is a member, not the end
      if (p[i + 1] === '^') out += p[++i];
      if (p[i + 1] === ']') out += p[++i];
    } else if (c === ']' && inClass) {
      inClass = false;
      out += c;
    } else if (c === '.' && !inClass) out += '[^\\n\\r\\x{2028}\\x{2029}]';
    else out += c;
  }
  return out;
}
