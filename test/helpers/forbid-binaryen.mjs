// Loaded with --import by test/cache.test.ts: any attempt to import Binaryen fails, which proves a
// warm-cache compile never loads it.
import { register } from 'node:module';

register(
  'data:text/javascript,' +
    encodeURIComponent(`export async function resolve(s, c, n) {
      if (s === 'binaryen') throw new Error('binaryen was imported');
      return n(s, c);
    }`),
);
