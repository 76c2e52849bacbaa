/** What the renderers need from the panel that shows them. */
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';

import type { AcpApi } from '../api';
import type { ITurnEndItem } from '../model';
import type { NoFetchSanitizer } from '../sanitizer';
import type { SessionView } from '../session';

export interface IRenderContext {
  readonly api: AcpApi;
  /** The sidebar's own rendermime (its sanitizer fetches nothing from another server without a click). */
  readonly rendermime: IRenderMimeRegistry;
  readonly sanitizer: NoFetchSanitizer;
  /**
   * The viewer's username (JupyterLab's `serviceManager.user.identity`; null until known): what another person did
   * is named, what the viewer did says "You".
   */
  me(): string | null;
  /** Whether `view` is the conversation on screen. */
  isShown(view: SessionView): boolean;
  /** Re-render `view` on the next frame (when it is on screen). */
  scheduleRender(view: SessionView): void;
  /** A transient line in the status bar. */
  flash(text: string, level?: string): void;
  /** A new code cell below the active one of the bound notebook. */
  insertCell(source: string): void;
  /** Put `source` in the active cell of the bound notebook (one undo step in the cell). */
  replaceCell(source: string): void;
  /** Send `text` again as a new prompt of the conversation on screen (an error's Retry). */
  resend(text: string): void;
  /** Whether JupyterLab can open a terminal here (an error's "log in" action, an agent terminal's card). */
  canOpenTerminal(): boolean;
  /** A new terminal, or the running terminal of that name (an agent's command). */
  openTerminal(name?: string): void;
  /** The turn end's "Review N changes" (review/), null while not known or nothing to review. */
  reviewFooter?(view: SessionView, item: ITurnEndItem): HTMLElement | null;
}
