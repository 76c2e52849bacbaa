/**
 * The markdown renderer, warmed before the first answer needs it.
 *
 * JupyterLab loads its markdown parser (marked and its plugins, some twenty code chunks) and each code block's
 * language (CodeMirror's python, shell) the first time markdown is rendered in the page. For the sidebar that first
 * time was the first answer of the first conversation opened: measured (bench/panel_history.py), 300 to 500 ms
 * between the answer's node in the log and its text, longer than the session's open and its replay together. Rendering
 * a small answer off screen once, while the lab is idle (or, at the latest, when the panel starts opening a
 * session, in parallel with its requests), moves that load off the path from opening a notebook to its last message.
 */
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';

/** What an agent's answer usually holds: a paragraph, emphasis, a list, python and shell code blocks. */
const SAMPLE = 'Warm **up**:\n\n- a `list`\n\n```python\nx = 1\n```\n\n```bash\nls\n```\n';

let warming: Promise<void> | null = null;

/**
 * Render the sample once (later calls return the same promise). Never rejects: a failure only means the first answer
 * pays the load itself.
 */
export function warmMarkdown(rendermime: IRenderMimeRegistry): Promise<void> {
  if (!warming) {
    warming = (async () => {
      try {
        const renderer = rendermime.createRenderer('text/markdown');
        await renderer.renderModel(new MimeModel({ data: { 'text/markdown': SAMPLE }, trusted: false }));
        renderer.dispose();
      } catch {
        // nothing warmed: the first answer loads the parser
      }
    })();
  }
  return warming;
}

/** Warm when the page is idle (at most `within` ms from now): the lab's own start goes first. */
export function warmWhenIdle(rendermime: IRenderMimeRegistry, within = 2000): void {
  const run = () => void warmMarkdown(rendermime);
  const idle = (window as { requestIdleCallback?: (cb: () => void, o: { timeout: number }) => number })
    .requestIdleCallback;
  if (idle) {
    idle(run, { timeout: within });
  } else {
    window.setTimeout(run, Math.min(within, 500));
  }
}
