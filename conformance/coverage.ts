/** Coverage report: every mnemonic and compressed form with its test count. */
import { COMPRESSED, MNEMONICS } from './isa.js';

/** Count, per name, the tests whose code contains it (each test counts once per name). */
export class Coverage {
  readonly counts = new Map<string, number>([...MNEMONICS, ...COMPRESSED, 'illegal'].map((n) => [n, 0]));
  tests = 0;
  instructions = 0;
  add(names: string[]): void {
    this.tests++;
    this.instructions += names.length;
    for (const n of new Set(names)) this.counts.set(n, (this.counts.get(n) ?? 0) + 1);
  }
  missing(): string[] {
    return [...MNEMONICS, ...COMPRESSED, 'illegal'].filter((n) => (this.counts.get(n) ?? 0) === 0);
  }
  report(header: string[]): string {
    const line = (n: string) => `${n.padEnd(12)} ${this.counts.get(n) ?? 0}`;
    return [
      ...header.map((h) => `# ${h}`),
      `# ${this.tests} test functions, ${this.instructions} instructions decoded`,
      '# name         tests covering it',
      '## base instructions (compressed ones counted under their compressed name)',
      ...MNEMONICS.map(line),
      '## compressed forms',
      ...COMPRESSED.map(line),
      '## reserved / illegal encodings (trap tests)',
      line('illegal'),
      '',
    ].join('\n');
  }
}
