/**
 * The composer: the prompt input (Enter sends, arrows walk the prompt history, Esc stops), the `/`
 * menu of agent commands and `@` completion of kernel variables, the "include selection" chip, images
 * (pasted, dropped, picked or a plot attached: `attach.ts`), and Send / Stop. (Over 400 lines on purpose: the
 * keys, the two menus and the chips act on one textarea and one draft; apart they would pass the draft around.)
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import { stopIcon } from '@jupyterlab/ui-components';

import { AcpApi, ApiError } from './api';
import { ImageTray } from './attach';
import { button, el } from './dom';
import { trans } from './i18n';
import type { SessionView } from './session';

/* eslint-disable @typescript-eslint/no-explicit-any */

export interface IPanelSettings {
  defaultAgent: string;
  includeSelection: boolean;
}

/** What the composer needs from the panel. */
export interface IComposerHost {
  readonly api: AcpApi;
  readonly settings: IPanelSettings;
  /** The conversation on screen. */
  readonly view: SessionView | null;
  /** The notebook the sidebar is bound to. */
  readonly notebook: NotebookPanel | null;
  /** The bound notebook's path, if it is open. */
  path(): string | null;
  flash(text: string, level?: string): void;
  renderChrome(): void;
  /** Queue a prompt sent while the agent works (sent when the turn ends: queue.ts); without it, refused. */
  queue?(view: SessionView, text: string, blocks: any[]): void;
  /**
   * Keep the prompt until the agent is set up (the built-in agent's model form is open): true when it was kept, and
   * it is sent once the form is saved (setup.ts).
   */
  hold?(view: SessionView, text: string): boolean;
}

export class Composer {
  readonly node = el('div', 'jp-ACP-composer');
  readonly input = el('textarea', 'jp-ACP-input');
  readonly chip = el('button', 'jp-ACP-chip');
  readonly send: HTMLButtonElement;
  readonly stop: HTMLButtonElement;
  /** Images waiting to go with the prompt, and their chip. */
  readonly images: ImageTray;
  private _menu = el('div', 'jp-ACP-slashMenu');
  private _includeSelection: boolean | null = null;
  private _menuIndex = 0;
  private _completeToken = 0;
  private _kinds = new Map<string, string>();

  constructor(private readonly _host: IComposerHost) {
    this.input.rows = 3;
    this.input.placeholder = trans.__('Ask the agent… (/ commands, @ variables)');
    this.input.title = trans.__(
      'Enter sends, Shift+Enter adds a line, / lists the agent’s commands, @ attaches a kernel variable'
    );
    this.input.setAttribute('aria-label', trans.__('Message to the agent'));
    this.input.addEventListener('keydown', e => this._onKey(e));
    this.input.addEventListener('input', () => this._updateMenu());
    // the selection may have changed (typed into the cell, selected text) since the chip was drawn
    this.input.addEventListener('focus', () => this.updateChip());
    this.chip.addEventListener('mouseenter', () => this.updateChip());
    this._menu.setAttribute('role', 'listbox');
    this._menu.setAttribute('aria-label', trans.__('Agent commands'));
    this._menu.hidden = true;
    this.chip.type = 'button';
    this.chip.addEventListener('click', () => {
      this._includeSelection = !this._selectionOn();
      this.updateChip();
    });
    this.send = button(
      trans.__('Send'),
      'jp-mod-accept jp-ACP-send',
      () => void this.sendPrompt(),
      undefined,
      trans.__('Send (Enter)')
    );
    this.stop = button(
      trans.__('Stop'),
      'jp-mod-warn jp-ACP-stop',
      () => void this.cancel(),
      stopIcon,
      trans.__('Stop the agent')
    );
    this.images = new ImageTray({
      api: _host.api,
      agentName: () => _host.view?.info.agent ?? null,
      path: () => _host.path(),
      flash: (text, level) => _host.flash(text, level)
    });
    this.images.listen(this.input, this.node);
    const row = el('div', 'jp-ACP-composerRow');
    row.append(this.chip, this.images.control, el('span', 'jp-ACP-spacer'), this.stop, this.send);
    this.node.append(this._menu, this.images.node, this.input, row);
  }

  private _selectionOn(): boolean {
    return this._includeSelection ?? this._host.settings.includeSelection;
  }

  /** The selection in the bound notebook: selected text in the active cell, else the selected cells. */
  private _selection(): { label: string; block: any } | null {
    const nb = this._host.notebook;
    if (!nb || nb.isDisposed) {
      return null;
    }
    const notebook = nb.content;
    const cell = notebook.activeCell;
    if (!cell) {
      return null;
    }
    const path = nb.context.localPath;
    const index = notebook.activeCellIndex;
    const editor = cell.editor;
    let text = '';
    if (editor) {
      const sel = editor.getSelection();
      const a = editor.getOffsetAt(sel.start);
      const b = editor.getOffsetAt(sel.end);
      if (a !== b) {
        text = editor.model.sharedModel.getSource().slice(Math.min(a, b), Math.max(a, b));
      }
    }
    if (text) {
      return {
        label: trans.__('Selection in cell %1', index + 1),
        block: {
          type: 'resource',
          resource: {
            uri: `${path}#cell=${cell.model.id}`,
            title: `selection in cell ${index + 1}`,
            mimeType: 'text/plain',
            text
          }
        }
      };
    }
    // only cells with something in them: an empty active cell attaches nothing
    const selected = notebook.widgets
      .map((c, i) => ({ c, i }))
      .filter(({ c }) => notebook.isSelectedOrActive(c) && c.model.sharedModel.getSource().trim() !== '');
    if (!selected.length) {
      return null;
    }
    const parts = selected.map(
      ({ c, i }) => `# cell ${i + 1} (${c.model.type}, id ${c.model.id})\n${c.model.sharedModel.getSource()}`
    );
    const first = selected[0].i + 1;
    const last = selected[selected.length - 1].i + 1;
    const label = selected.length > 1 ? trans.__('Cells %1–%2', first, last) : trans.__('Cell %1', first);
    // the resource's title is read by the agent: English whatever the page's language
    const title = selected.length > 1 ? `cells ${first}–${last}` : `cell ${first}`;
    return {
      label,
      block: {
        type: 'resource',
        resource: {
          uri: `${path}#cell=${selected.map(({ c }) => c.model.id).join(',')}`,
          title,
          mimeType: 'text/x-python',
          text: parts.join('\n\n')
        }
      }
    };
  }

  updateChip(): void {
    this.images.refresh();
    const on = this._selectionOn();
    const sel = this._host.notebook ? this._selection() : null;
    this.chip.textContent = '';
    this.chip.className = 'jp-ACP-chip' + (on ? ' jp-mod-on' : '');
    this.chip.setAttribute('aria-pressed', String(on));
    const label = sel ? sel.label : trans.__('nothing selected');
    this.chip.classList.toggle('jp-mod-empty', on && !sel);
    this.chip.appendChild(el('span', 'jp-ACP-chipMark', on ? '✓' : '+'));
    this.chip.appendChild(
      el('span', 'jp-ACP-chipLabel', on ? trans.__('Include: %1', label) : trans.__('Include selection'))
    );
    // the tooltip previews what goes with the prompt
    const text: string = sel?.block.resource.text ?? '';
    const lines = text.split('\n');
    const preview = lines.slice(0, 12).join('\n').slice(0, 600) + (lines.length > 12 || text.length > 600 ? '\n…' : '');
    this.chip.title = !on
      ? trans.__('Click to send the selected cell or text with your prompt.')
      : sel
        ? trans.__('Goes with your prompt (click to leave it out):\n\n%1', preview)
        : trans.__(
            'Nothing to include: select text or a cell that is not empty. Click to stop including the selection.'
          );
    this.chip.setAttribute(
      'aria-label',
      on
        ? trans.__('Include: %1 (goes with the prompt; click to leave it out)', label)
        : trans.__('Include selection (click to send the selected cell or text with the prompt)')
    );
  }

  private _onKey(e: KeyboardEvent): void {
    const input = this.input;
    if (!this._menu.hidden) {
      const items = Array.from(this._menu.children) as HTMLElement[];
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        this._menuIndex = (this._menuIndex + (e.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length;
        this._highlightMenu();
        return;
      }
      if ((e.key === 'Tab' || e.key === 'Enter') && items.length) {
        e.preventDefault();
        items[this._menuIndex]?.click();
        return;
      }
      if (e.key === 'Escape') {
        this._menu.hidden = true;
        return;
      }
    }
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void this.sendPrompt();
      return;
    }
    const view = this._host.view;
    if (!view) {
      return;
    }
    const history = view.model.promptHistory();
    if (e.key === 'ArrowUp' && !input.value.slice(0, input.selectionStart).includes('\n') && history.length) {
      if (input.value && view.historyIndex === -1) {
        return; // do not throw away a draft
      }
      e.preventDefault();
      view.historyIndex = view.historyIndex === -1 ? history.length - 1 : Math.max(0, view.historyIndex - 1);
      input.value = history[view.historyIndex];
    } else if (
      e.key === 'ArrowDown' &&
      view.historyIndex !== -1 &&
      !input.value.slice(input.selectionEnd).includes('\n')
    ) {
      e.preventDefault();
      view.historyIndex++;
      if (view.historyIndex >= history.length) {
        view.historyIndex = -1;
        input.value = '';
      } else {
        input.value = history[view.historyIndex];
      }
    } else if (e.key === 'Escape' && view.model.runningTurn) {
      void this.cancel();
    }
  }

  private _updateMenu(): void {
    const commands = this._host.view?.model.commands ?? [];
    const value = this.input.value;
    const m = /^\/(\S*)$/.exec(value);
    if (m && commands.length) {
      const matches = commands.filter(c => c.name.startsWith(m[1]));
      this._fillMenu(
        matches.map(c => ({ label: '/' + c.name, detail: c.description ?? '', apply: () => `/${c.name} ` })),
        trans.__('Agent commands')
      );
      return;
    }
    const caret = this.input.selectionStart ?? value.length;
    const at = /(^|\s)@([A-Za-z_][A-Za-z0-9_]*)?$/.exec(value.slice(0, caret));
    if (at) {
      void this._completeVariable(at[2] ?? '', caret);
      return;
    }
    this._fillMenu([], '');
  }

  private _fillMenu(items: { label: string; detail: string; apply: () => string }[], label: string): void {
    this._menu.textContent = '';
    this._menu.setAttribute('aria-label', label);
    for (const it of items) {
      const opt = el('div', 'jp-ACP-slashItem');
      opt.setAttribute('role', 'option');
      opt.append(el('span', 'jp-ACP-slashName', it.label), el('span', 'jp-ACP-muted', it.detail));
      opt.addEventListener('mousedown', e => e.preventDefault());
      opt.addEventListener('click', () => {
        this.input.value = it.apply();
        this._menu.hidden = true;
        this.input.focus();
      });
      this._menu.appendChild(opt);
    }
    this._menuIndex = 0;
    this._menu.hidden = items.length === 0;
    this._highlightMenu();
  }

  /** `@name`: complete kernel variable names (the kernel's own completer; runs no user code). */
  private async _completeVariable(prefix: string, caret: number): Promise<void> {
    const kernel = this._host.notebook?.sessionContext.session?.kernel;
    if (!kernel) {
      this._fillMenu([], '');
      return;
    }
    const token = ++this._completeToken;
    let names: string[] = [];
    try {
      const reply = await kernel.requestComplete({ code: prefix, cursor_pos: prefix.length });
      const content: any = reply.content;
      if (content.status === 'ok') {
        const meta = content.metadata?._jupyter_types_experimental as any[] | undefined;
        const kinds = new Map<string, string>((meta ?? []).map(x => [x.text, x.type]));
        names = (content.matches as string[])
          .filter(n => /^[A-Za-z_][A-Za-z0-9_]*$/.test(n))
          .filter(
            n =>
              !kinds.size ||
              ['instance', 'statement', 'module', 'function', 'class'].includes(kinds.get(n) ?? 'instance')
          )
          .filter(n => !kinds.size || kinds.get(n) !== 'keyword')
          .slice(0, 20);
        this._kinds = kinds;
      }
    } catch {
      names = [];
    }
    if (token !== this._completeToken) {
      return;
    }
    const value = this.input.value;
    const before = value.slice(0, caret).replace(/@[A-Za-z0-9_]*$/, '');
    const after = value.slice(caret);
    this._fillMenu(
      names.map(n => ({
        label: '@' + n,
        detail: this._kinds.get(n) ?? trans.__('variable'),
        apply: () => `${before}@${n} ${after.replace(/^\s+/, '')}`
      })),
      trans.__('Kernel variables')
    );
  }

  /** A bounded summary of each `@name` in the prompt (the kernel's inspector: type, value, length). */
  private async _variableBlocks(text: string): Promise<any[]> {
    const kernel = this._host.notebook?.sessionContext.session?.kernel;
    const path = this._host.path();
    if (!kernel || !path) {
      return [];
    }
    const names = Array.from(new Set(Array.from(text.matchAll(/(?:^|\s)@([A-Za-z_][A-Za-z0-9_]*)/g), m => m[1])));
    const blocks: any[] = [];
    for (const name of names.slice(0, 8)) {
      try {
        const reply: any = await Promise.race([
          kernel.requestInspect({ code: name, cursor_pos: name.length, detail_level: 0 }),
          new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 3000))
        ]);
        const c = reply.content;
        if (c.status !== 'ok' || !c.found) {
          continue;
        }
        // eslint-disable-next-line no-control-regex
        let summary = String(c.data?.['text/plain'] ?? '').replace(/\u001b\[[0-9;]*m/g, '');
        if (summary.length > 2000) {
          summary = summary.slice(0, 2000) + '\n… (truncated)';
        }
        blocks.push({
          type: 'resource',
          resource: { uri: `kernel:${path}#${name}`, title: `@${name}`, mimeType: 'text/plain', text: summary }
        });
      } catch {
        // the kernel is busy or gone: the name stays in the text, the agent can ask its tools
      }
    }
    return blocks;
  }

  private _highlightMenu(): void {
    Array.from(this._menu.children).forEach((c, i) => {
      c.classList.toggle('jp-mod-active', i === this._menuIndex);
      c.setAttribute('aria-selected', String(i === this._menuIndex));
    });
  }

  async sendPrompt(): Promise<void> {
    const view = this._host.view;
    const text = this.input.value.trim();
    if (!view || (!text && !this.images.count)) {
      return;
    }
    if (view.model.runningTurn && !this._host.queue) {
      this._host.flash(trans.__('The agent is still working: wait, or press Stop.'), 'warning');
      return;
    }
    if (text && !this.images.count && this._host.hold?.(view, text)) {
      this.input.value = ''; // it shows in the set-up card, waiting for Save
      this._menu.hidden = true;
      return;
    }
    const blocks: any[] = text ? [{ type: 'text', text }] : [];
    if (this._selectionOn()) {
      const sel = this._selection();
      if (sel && sel.block.resource.text.trim()) {
        blocks.push(sel.block);
      }
    }
    if (/(^|\s)@[A-Za-z_]/.test(text)) {
      blocks.push(...(await this._variableBlocks(text)));
    }
    const attached = this.images.take();
    blocks.push(...attached.blocks);
    const draft = this.input.value;
    this.input.value = '';
    this._menu.hidden = true;
    view.historyIndex = -1;
    view.stick = true;
    if (view.model.runningTurn && this._host.queue) {
      this._host.queue(view, text, blocks); // sent when the running turn ends
      return;
    }
    try {
      await this._host.api.prompt(view.info.id, blocks);
      view.startError = null;
    } catch (err) {
      if (!this.input.value) {
        this.input.value = draft;
      }
      this.images.restore(attached.images);
      const status = err instanceof ApiError ? err.status : 0;
      if (status === 409 && this._host.queue) {
        // a turn started meanwhile (another tab, the magic): queue it rather than refuse
        this.input.value = this.input.value === draft ? '' : this.input.value;
        this.images.take();
        this._host.queue(view, text, blocks);
        return;
      }
      this._host.flash(
        status === 409
          ? trans.__('The agent is still working on the previous prompt.')
          : trans.__('Could not send: %1', (err as Error).message),
        status === 409 ? 'warning' : 'error'
      );
    }
  }

  async cancel(): Promise<void> {
    const view = this._host.view;
    if (!view) {
      return;
    }
    this.stop.disabled = true;
    view.stopping = view.model.runningTurn;
    this._host.renderChrome();
    try {
      await this._host.api.cancel(view.info.id);
    } catch (err) {
      view.stopping = null;
      this._host.flash(trans.__('Could not stop: %1', (err as Error).message));
    } finally {
      this.stop.disabled = false;
    }
  }
}
