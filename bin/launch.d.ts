/** Whether dist/ holds a build of the current sources (bin/launch.js). */
export function builtIsCurrent(): boolean;
/** Import the entry module `entry` (a path under src/ without extension), built or from the sources. */
export function launch(entry: string): Promise<unknown>;
