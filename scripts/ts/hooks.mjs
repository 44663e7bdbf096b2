// Node module hooks that run berm's TypeScript sources directly: `.ts` files are transformed by
// esbuild (types stripped, nothing bundled) and `./x.js` specifiers fall back to `./x.ts`, as tsc's
// NodeNext resolution writes them. Everything else passes through untouched: a general-purpose
// loader (tsx) that intercepts every file made importing Binaryen's 10 MB module take 10 s
// instead of 0.5 s.
import { transform } from 'esbuild';

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    if (
      specifier.endsWith('.js') &&
      (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('file:'))
    ) {
      return nextResolve(specifier.slice(0, -3) + '.ts', context);
    }
    throw err;
  }
}

export async function load(url, context, nextLoad) {
  if (!url.endsWith('.ts') || url.includes('/node_modules/')) return nextLoad(url, context);
  const { source } = await nextLoad(url, { ...context, format: 'module' });
  const out = await transform(String(source), {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcemap: 'inline',
    sourcefile: new URL(url).pathname,
  });
  return { format: 'module', source: out.code, shortCircuit: true };
}
