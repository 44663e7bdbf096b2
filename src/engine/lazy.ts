/**
 * The engine's side of the lazy tier (src/translate/lazy-image.ts): a module's guest functions
 * translated and compiled one at a time, each once per module, when an instance's call first
 * reaches it, and linked into that instance's shell.
 */
import { IMPORT_MODULE, Imports, LazyAbi, TranslateError } from '../translate/abi.js';
import type { LazyTranslator } from '../translate/lazy-image.js';

/** The default {@link LazyCode.groupLimit}. */
export const LAZY_GROUP_LIMIT = 64;

/** The compiled shell of an image and the function modules compiled so far. */
export class LazyCode {
  /** the compiled module holding each table slot's guest function, once translated */
  private readonly modules: (WebAssembly.Module | undefined)[];

  /**
   * @param translator the image's lazy translator
   * @param shell the compiled shell module (what the GuestModule instantiates)
   */
  constructor(
    private readonly translator: LazyTranslator,
    readonly shell: WebAssembly.Module,
  ) {
    this.modules = new Array<WebAssembly.Module | undefined>(translator.slotFunctions.length);
  }

  /** Guest functions translated so far (over every instance of the module). */
  translated = 0;
  /** Modules translated so far (each a function and callees of it not translated before). */
  groups = 0;
  /**
   * At most this many functions per module: a function first reached is translated with the
   * functions it calls directly, transitively, breadth first up to the limit (V8 costs about half
   * a millisecond per module compiled and instantiated; each function translated that no call
   * reaches is wasted).
   */
  groupLimit = LAZY_GROUP_LIMIT;

  /** Guest functions in the image (table slots). */
  get functions(): number {
    return this.modules.length;
  }

  /** The entries of the guest functions translated so far, ascending. */
  translatedEntries(): number[] {
    const out: number[] = [];
    this.modules.forEach((m, k) => {
      if (m !== undefined) out.push(this.translator.slotFunctions[k].start);
    });
    return out.sort((a, b) => a - b);
  }

  /**
   * Put the guest function of table slot `slot` into the table of the shell instance whose
   * exports are `shell` (over guest memory `memory`): translated and compiled on its first reach
   * in any instance with callees of it ({@link groupLimit}), instantiated against this shell
   * (which fills their slots too).
   * @throws TranslateError when translation fails or V8 refuses the function's module (a bug)
   */
  install(slot: number, shell: WebAssembly.Instance['exports'], memory: WebAssembly.Memory): void {
    let mod = this.modules[slot];
    if (mod === undefined) {
      const { wasm, slots } = this.translator.translateGroup(
        slot,
        (k) => this.modules[k] !== undefined,
        this.groupLimit,
      );
      try {
        mod = new WebAssembly.Module(wasm);
      } catch (e) {
        const fn = this.translator.slotFunctions[slot];
        const name = `f_${fn.start.toString(16)}`;
        const text = e instanceof Error ? e.message : String(e);
        throw new TranslateError(`V8 refused the translated module of ${name}: ${text}`, name);
      }
      for (const k of slots) this.modules[k] = mod;
      this.translated += slots.length;
      this.groups++;
    }
    // its element segments put its functions in their slots
    new WebAssembly.Instance(mod, {
      [IMPORT_MODULE]: { [Imports.memory]: memory },
      [LazyAbi.shellModule]: shell,
    });
  }
}
