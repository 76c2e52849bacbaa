/**
 * The extension's strings through JupyterLab's `ITranslator` (domain `jupyter-acp-host`).
 *
 * The plugin loads the bundle once, at activation (`setTranslator`); every module then calls `trans.__(...)`. One
 * bundle held here, rather than passed down, because many strings live in plain functions (a badge's words, a usage
 * tooltip, a review row) called by renderers far from the plugin: threading a bundle through each signature would
 * change every caller for no gain, since the language is chosen once per page. Until activation (and in node's test
 * runner) the strings are the English source, with the same `%1` placeholders JupyterLab's gettext fills.
 *
 * Type-only imports: `@jupyterlab/translation` is an ES module node's test runner cannot load.
 */
import type { ITranslator, TranslationBundle } from '@jupyterlab/translation';

/** The gettext domain of this extension's strings (a language pack's `jupyter-acp-host` catalog). */
export const DOMAIN = 'jupyter-acp-host';

/** `%1`, `%2`... replaced by the arguments, `%%` by `%`: what JupyterLab's gettext does with an untranslated string. */
export function format(msg: string, args: readonly unknown[]): string {
  return msg.replace(/%(%|\d+)/g, (all, which: string) => {
    if (which === '%') {
      return '%';
    }
    const i = Number(which) - 1;
    return i < args.length ? String(args[i]) : all;
  });
}

let bundle: TranslationBundle | null = null;

/** Use this translator's bundle for the extension's strings from now on (the plugin's activation). */
export function setTranslator(translator: ITranslator | null | undefined): void {
  bundle = translator ? translator.load(DOMAIN) : null;
}

/** The subset of `TranslationBundle` the extension uses, looked up at each call (so it follows `setTranslator`). */
export const trans = {
  /** A string, its `%1`... filled from `args`. */
  __(msg: string, ...args: unknown[]): string {
    return bundle ? bundle.__(msg, ...(args as string[])) : format(msg, args);
  },
  /** Singular or plural by `n`; as in gettext, `%1` is `n` and `args` fill `%2`, `%3`... */
  _n(singular: string, plural: string, n: number, ...args: unknown[]): string {
    return bundle
      ? bundle._n(singular, plural, n, ...(args as string[]))
      : format(n === 1 ? singular : plural, [n, ...args]);
  },
  /** A string in a context (the same English words meaning two things). */
  _p(context: string, msg: string, ...args: unknown[]): string {
    return bundle ? bundle._p(context, msg, ...(args as string[])) : format(msg, args);
  }
};
