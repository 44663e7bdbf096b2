/** Whether dist/ holds a build of the current sources (bin/launch.js). */
export function builtIsCurrent(): boolean;
/**
 * Run the entry module `entry` (a path under src/ without extension), built or from the sources;
 * with `bundle` (a file name under dist/), a current build runs that CommonJS bundle instead when
 * it exists (bin/launch.js).
 */
export function launch(entry: string, bundle?: string): Promise<unknown>;
/**
 * Give V8's --stack-size flag its default value back when node started with another one, keeping
 * the larger stack, so that code caches made under the default flags are taken (bin/launch.js).
 */
export function restoreStackSizeFlag(): void;
