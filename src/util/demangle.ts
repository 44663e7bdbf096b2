/**
 * Rust symbol names (the v0 mangling rustc uses for the Rust SDK's harnesses) made readable for
 * trap backtraces: `_RNvNtCs9Y3AgaxtF4a_4berm3cap6invoke` -> `berm::cap::invoke`. The grammar is
 * rustc's (https://doc.rust-lang.org/rustc/symbol-mangling/v0.html); the output follows
 * rustc-demangle's alternate form (no crate hashes), closures as `{closure#N}`.
 *
 * The names come from a guest ELF, so they are hostile input: the parser is bounded (nesting
 * depth, total steps, output length, backreferences only to earlier positions) and any name it does not fully
 * understand (punycode identifiers, malformed text) is returned unchanged.
 */

const MAX_DEPTH = 64;
const MAX_OUT = 1024;
const MAX_STEPS = 4096;

const BASIC: Readonly<Record<string, string>> = {
  a: 'i8',
  b: 'bool',
  c: 'char',
  d: 'f64',
  e: 'str',
  f: 'f32',
  h: 'u8',
  i: 'isize',
  j: 'usize',
  l: 'i32',
  m: 'u32',
  n: 'i128',
  o: 'u128',
  s: 'i16',
  t: 'u16',
  u: '()',
  v: '...',
  x: 'i64',
  y: 'u64',
  z: '!',
  p: '_',
};

class Unsupported extends Error {}

class Parser {
  pos = 0;
  depth = 0;
  constructor(private readonly s: string) {}

  private peek(): string {
    return this.s[this.pos] ?? '';
  }
  private next(): string {
    const c = this.s[this.pos];
    if (c === undefined) throw new Unsupported('end of name');
    this.pos++;
    return c;
  }
  private eat(c: string): boolean {
    if (this.s[this.pos] !== c) return false;
    this.pos++;
    return true;
  }
  private steps = 0;
  private enter(): void {
    // backreferences let a short name expand exponentially: bound the work as well as the depth
    if (++this.depth > MAX_DEPTH || ++this.steps > MAX_STEPS) throw new Unsupported('too deep');
  }

  /** base-62-number: `_` is 0, else digits 0-9a-zA-Z then `_`, value + 1 (saturating). */
  base62(): number {
    if (this.eat('_')) return 0;
    let v = 0;
    for (;;) {
      const c = this.next();
      if (c === '_') return v + 1;
      const d = /[0-9]/.test(c)
        ? c.charCodeAt(0) - 48
        : /[a-z]/.test(c)
          ? c.charCodeAt(0) - 87
          : /[A-Z]/.test(c)
            ? c.charCodeAt(0) - 29
            : -1;
      if (d < 0) throw new Unsupported('bad base-62 digit');
      // crate disambiguators are 64-bit hashes: their value is never used, so it may saturate
      v = Math.min(v * 62 + d, Number.MAX_SAFE_INTEGER);
    }
  }

  private disambiguator(): number {
    return this.eat('s') ? this.base62() + 1 : 0;
  }

  private decimal(): number {
    const m = /^(0|[1-9][0-9]{0,6})/.exec(this.s.slice(this.pos, this.pos + 8));
    if (!m) throw new Unsupported('expected a decimal number');
    this.pos += m[1].length;
    return Number(m[1]);
  }

  /** undisambiguated-identifier: [u] decimal [_] bytes (punycode `u` is not decoded). */
  private ident(): string {
    if (this.peek() === 'u') throw new Unsupported('punycode identifier');
    const n = this.decimal();
    this.eat('_');
    const text = this.s.slice(this.pos, this.pos + n);
    if (text.length !== n) throw new Unsupported('identifier past the end');
    this.pos += n;
    return text;
  }

  private backref<T>(parse: () => T): T {
    const at = this.pos - 1; // the 'B'
    const target = this.base62();
    if (target >= at) throw new Unsupported('backreference forward');
    const saved = this.pos;
    this.pos = target;
    try {
      return parse();
    } finally {
      this.pos = saved;
    }
  }

  /** A path; `inValue`: generic arguments are written `::<...>` (value position) or `<...>`. */
  path(inValue: boolean): string {
    this.enter();
    try {
      const c = this.next();
      switch (c) {
        case 'C':
          this.disambiguator();
          return this.ident();
        case 'N': {
          const ns = this.next();
          const parent = this.path(inValue);
          const dis = this.disambiguator();
          const name = this.ident();
          // a lowercase namespace is an ordinary path segment (an empty one adds nothing: a
          // tuple struct's constructor, `Nc...5Break0`, is the struct's own path)
          if (/[a-z]/.test(ns)) return name ? `${parent}::${name}` : parent;
          const kind = ns === 'C' ? 'closure' : ns === 'S' ? 'shim' : ns;
          return `${parent}::{${kind}${name ? `:${name}` : ''}#${dis}}`;
        }
        case 'M': {
          this.disambiguator();
          this.path(false);
          return `<${this.type()}>`;
        }
        case 'X': {
          this.disambiguator();
          this.path(false);
          const self = this.type();
          return `<${self} as ${this.path(false)}>`;
        }
        case 'Y': {
          const self = this.type();
          return `<${self} as ${this.path(false)}>`;
        }
        case 'I': {
          const base = this.path(inValue);
          const args: string[] = [];
          while (!this.eat('E')) args.push(this.genericArg());
          return `${base}${inValue ? '::' : ''}<${args.join(', ')}>`;
        }
        case 'B':
          return this.backref(() => this.path(inValue));
        default:
          throw new Unsupported(`path tag ${c}`);
      }
    } finally {
      this.depth--;
    }
  }

  private genericArg(): string {
    if (this.eat('L')) {
      this.base62();
      return "'_";
    }
    if (this.eat('K')) return this.constant();
    return this.type();
  }

  private constant(): string {
    if (this.eat('p')) return '_';
    if (this.eat('B')) return this.backref(() => this.constant());
    const ty = this.next();
    if (!(ty in BASIC)) throw new Unsupported('const of a non-basic type');
    const neg = this.eat('n');
    const start = this.pos;
    while (/[0-9a-f]/.test(this.peek())) this.pos++;
    const hex = this.s.slice(start, this.pos);
    if (!this.eat('_')) throw new Unsupported('const data');
    if (ty === 'b') return hex === '1' ? 'true' : 'false';
    if (hex.length > 32) throw new Unsupported('const too large');
    const v = hex === '' ? 0n : BigInt(`0x${hex}`);
    return `${neg ? '-' : ''}${v}: ${BASIC[ty]}`;
  }

  type(): string {
    this.enter();
    try {
      const c = this.peek();
      if (c in BASIC && c !== '' && /[a-z]/.test(c)) {
        this.pos++;
        return BASIC[c]!;
      }
      this.pos++;
      switch (c) {
        case 'R':
        case 'Q': {
          if (this.eat('L')) this.base62();
          return `&${c === 'Q' ? 'mut ' : ''}${this.type()}`;
        }
        case 'P':
          return `*const ${this.type()}`;
        case 'O':
          return `*mut ${this.type()}`;
        case 'A': {
          const t = this.type();
          return `[${t}; ${this.constant()}]`;
        }
        case 'S':
          return `[${this.type()}]`;
        case 'T': {
          const ts: string[] = [];
          while (!this.eat('E')) ts.push(this.type());
          return ts.length === 1 ? `(${ts[0]},)` : `(${ts.join(', ')})`;
        }
        case 'F': {
          if (this.eat('G')) this.base62();
          const unsafe = this.eat('U');
          if (this.eat('K')) {
            if (!this.eat('C')) this.ident();
          }
          const params: string[] = [];
          while (!this.eat('E')) params.push(this.type());
          const ret = this.type();
          return `${unsafe ? 'unsafe ' : ''}fn(${params.join(', ')})${ret === '()' ? '' : ` -> ${ret}`}`;
        }
        case 'D': {
          if (this.eat('G')) this.base62();
          const traits: string[] = [];
          while (!this.eat('E')) {
            let t = this.path(false);
            while (this.eat('p')) {
              const name = this.ident();
              t += `<${name} = ${this.type()}>`;
            }
            traits.push(t);
          }
          if (!this.eat('L')) throw new Unsupported('dyn lifetime');
          this.base62();
          return `dyn ${traits.join(' + ')}`;
        }
        case 'B':
          return this.backref(() => this.type());
        default:
          this.pos--;
          return this.path(false);
      }
    } finally {
      this.depth--;
    }
  }
}

/**
 * The readable form of a Rust v0 symbol name (`_R...`), or `name` unchanged when it is not one or
 * cannot be read in full within the bounds.
 */
export function demangle(name: string): string {
  if (!name.startsWith('_R')) return name;
  // a vendor-specific suffix (`.llvm.123`) follows a dot
  const dot = name.indexOf('.');
  const body = name.slice(2, dot < 0 ? undefined : dot);
  const p = new Parser(body);
  try {
    if (/[0-9]/.test(body[0] ?? '')) throw new Unsupported('encoding version');
    const out = p.path(true);
    // what may follow is the instantiating crate (a path), which the readable form leaves out
    if (p.pos < body.length) p.path(false);
    if (p.pos !== body.length || out.length > MAX_OUT) return name;
    return out;
  } catch (e) {
    if (e instanceof Unsupported || e instanceof RangeError) return name;
    throw e;
  }
}

/**
 * `text` with every Rust v0 symbol name in it demangled (a daemon's trap message, `... at pc
 * 0x14f5e (_RNv...+0x3c)`); names that cannot be read stay as they are.
 */
export function demangleIn(text: string): string {
  return text.replace(/\b_R[0-9A-Za-z_]+/g, (m) => demangle(m));
}
