/**
 * The history menu: the notebook's earlier conversations (first prompt, date, agent), each opened
 * read-only, resumed or deleted; the agent's own past sessions of the notebook's folder too.
 *
 * Apart from the panel because it is about what the notebook said before, not the conversation on
 * screen: the panel gives it a button in its header, a place for the menu and one for the read-only
 * conversation (with the panel's own renderers), and tells it when the notebook changes.
 */
import { historyIcon } from '@jupyterlab/ui-components';

import { AcpApi, IConversationInfo, ISessionInfo } from './api';
import { button, el } from './dom';
import { trans } from './i18n';
import { ChatModel } from './model';
import { IRenderContext, renderItem } from './renderers';
import type { IEntry, SessionView } from './session';

/** Pages of an earlier conversation read at most when it is opened. */
const MAX_PAGES = 20;

export interface IHistoryHost {
  readonly api: AcpApi;
  /** The conversation on screen (null: no notebook, no session). */
  readonly view: SessionView | null;
  /** The panel's render context (the read-only view uses the same renderers). */
  readonly ctx: IRenderContext;
  /** The panel's node: it shows the read-only conversation instead of the live one while reading. */
  readonly node: HTMLElement;
  flash(text: string, level?: string): void;
  /** The session changed under the view (a conversation deleted or resumed): show it afresh. */
  reload(): Promise<void>;
}

/** A read-only conversation: what the renderers need of a session view, without a stream. */
class ArchiveView {
  readonly model = new ChatModel();
  readonly log = el('div', 'jp-ACP-log jp-ACP-archiveLog');
  nodes = new Map<string, IEntry>();
  anchor = null;
  stick = false;
  startError: string | null = null;
  revertible = new Set<string>();

  constructor(public info: ISessionInfo) {}

  async refreshRevertible(): Promise<void> {
    // nothing of an earlier conversation can be reverted from here
  }

  restoreAnchor(): void {
    // the log is read from the top
  }
}

function when(c: IConversationInfo): string {
  const ts = c.started ? new Date(c.started * 1000) : c.updated_at ? new Date(c.updated_at) : null;
  if (!ts || isNaN(ts.getTime())) {
    return '';
  }
  return ts.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export class HistoryMenu {
  readonly button: HTMLButtonElement;
  readonly menu = el('div', 'jp-ACP-historyMenu');
  /** The read-only conversation: its banner and its log. */
  readonly archive = el('div', 'jp-ACP-archive');
  private _banner = el('div', 'jp-ACP-archiveBanner');
  private _reading: ArchiveView | null = null;
  private _token = 0;

  constructor(private readonly _host: IHistoryHost) {
    this.button = button(
      '',
      'jp-ACP-iconButton jp-ACP-historyButton',
      () => void this.toggle(),
      historyIcon,
      trans.__('Earlier conversations of this notebook')
    );
    this.button.setAttribute('aria-haspopup', 'menu');
    this.button.setAttribute('aria-expanded', 'false');
    this.menu.hidden = true;
    this.menu.setAttribute('role', 'menu');
    this.menu.setAttribute('aria-label', trans.__('Conversations of this notebook'));
    this.menu.addEventListener('keydown', e => {
      if (e.key === 'Escape') {
        this.closeMenu();
        this.button.focus();
      }
    });
    this.archive.hidden = true;
    document.addEventListener('mousedown', e => {
      const target = e.target as Node;
      if (!this.menu.hidden && !this.menu.contains(target) && !this.button.contains(target)) {
        this.closeMenu();
      }
    });
  }

  /** The notebook or its session changed: nothing of the previous one stays open. */
  close(): void {
    this.closeMenu();
    this._closeArchive();
  }

  closeMenu(): void {
    this.menu.hidden = true;
    this.button.setAttribute('aria-expanded', 'false');
  }

  async toggle(): Promise<void> {
    if (!this.menu.hidden) {
      this.closeMenu();
      return;
    }
    await this.refresh();
  }

  /** Open (or refresh) the menu with the session's conversations. */
  async refresh(): Promise<void> {
    const view = this._host.view;
    if (!view) {
      return;
    }
    const token = ++this._token;
    this.menu.hidden = false;
    this.button.setAttribute('aria-expanded', 'true');
    this.menu.textContent = '';
    this.menu.append(
      el('div', 'jp-ACP-historyHead', trans.__('Conversations in this notebook')),
      el('div', 'jp-ACP-muted', trans.__('Loading…'))
    );
    let convs: IConversationInfo[];
    try {
      convs = await this._host.api.conversations(view.info.id);
    } catch (err) {
      if (token === this._token) {
        this.menu.lastElementChild!.textContent = trans.__(
          'Could not list the conversations: %1',
          (err as Error).message
        );
      }
      return;
    }
    if (token !== this._token || this._host.view !== view) {
      return;
    }
    this._renderList(view, convs);
  }

  private _renderList(view: SessionView, convs: IConversationInfo[]): void {
    this.menu.textContent = '';
    this.menu.append(el('div', 'jp-ACP-historyHead', trans.__('Conversations in this notebook')));
    const earlier = convs.filter(c => !c.current);
    if (!earlier.length) {
      this.menu.append(
        el(
          'div',
          'jp-ACP-historyEmpty',
          trans.__('No earlier conversation yet: “New conversation” keeps this one here.')
        )
      );
    }
    for (const c of convs) {
      const row = el('div', 'jp-ACP-historyItem');
      row.setAttribute('role', 'menuitem');
      row.dataset.cid = c.id ?? '';
      row.dataset.kind = c.kind;
      row.classList.toggle('jp-mod-current', c.current);
      const open = el('button', 'jp-ACP-historyOpen');
      open.type = 'button';
      open.append(el('span', 'jp-ACP-historyTitle', c.title || trans.__('(no prompt yet)')));
      const meta = [when(c), c.agent];
      if (c.kind === 'ours') {
        meta.push(trans._n('%1 turn', '%1 turns', c.turns ?? 0));
      }
      open.append(el('span', 'jp-ACP-historyMeta', meta.filter(Boolean).join(' · ')));
      if (c.current) {
        open.append(el('span', 'jp-ACP-historyBadge', trans.__('current')));
        open.title = trans.__('The conversation shown in the panel');
        open.addEventListener('click', () => this.close());
      } else if (c.kind === 'agent') {
        open.append(el('span', 'jp-ACP-historyBadge', trans.__('agent’s own')));
        open.title = trans.__('A session the agent keeps itself for this folder: resume it to read and continue it');
        open.disabled = true;
      } else {
        open.title = trans.__('Read this conversation (read-only)');
        open.addEventListener('click', () => void this._openArchive(view, c));
      }
      row.append(open);
      if (!c.current && c.id) {
        const actions = el('div', 'jp-ACP-historyActions');
        actions.append(
          button(
            trans.__('Resume'),
            'jp-ACP-historyResume',
            () => void this._resume(view, c),
            undefined,
            // the visible word leads the accessible name (WCAG 2.5.3, "label in name")
            trans.__('Resume: make it the current conversation again')
          )
        );
        if (c.kind === 'ours') {
          actions.append(
            button(
              trans.__('Delete'),
              'jp-ACP-historyDelete',
              () => this._confirmDelete(view, c, row),
              undefined,
              trans.__('Delete this conversation')
            )
          );
        }
        row.append(actions);
      }
      this.menu.append(row);
    }
  }

  private _confirmDelete(view: SessionView, c: IConversationInfo, row: HTMLElement): void {
    const actions = row.querySelector('.jp-ACP-historyActions');
    if (!actions) {
      return;
    }
    actions.textContent = '';
    actions.append(
      el('span', 'jp-ACP-historyConfirm', trans.__('Delete it for good?')),
      button(
        trans.__('Delete'),
        'jp-ACP-historyDeleteYes',
        () => void this._delete(view, c),
        undefined,
        trans.__('Delete this conversation and its history')
      ),
      button(trans.__('Keep'), 'jp-ACP-historyDeleteNo', () => void this.refresh(), undefined, trans.__('Keep it'))
    );
  }

  private async _delete(view: SessionView, c: IConversationInfo): Promise<void> {
    let answer: { agent_deleted?: boolean; agent_error?: string | null };
    try {
      answer = await this._host.api.deleteConversation(view.info.id, c.id!);
    } catch (err) {
      this._host.flash(trans.__('Could not delete the conversation: %1', (err as Error).message));
      return;
    }
    if (this._reading?.info.id === view.info.id && this.archive.dataset.cid === c.id) {
      this._closeArchive();
    }
    if (answer.agent_error) {
      // ours is gone; the agent's own copy stayed (it failed session/delete): say so, it is not a success
      this._host.flash(
        trans.__('Conversation deleted here; %1 kept its copy: %2', view.info.agent, answer.agent_error)
      );
    } else {
      this._host.flash(
        answer.agent_deleted
          ? trans.__('Conversation deleted, here and by the agent.')
          : trans.__('Conversation deleted.'),
        'info'
      );
    }
    await this._host.reload(); // its messages leave the panel too
    await this.refresh();
  }

  private async _resume(view: SessionView, c: IConversationInfo): Promise<void> {
    try {
      await this._host.api.resumeConversation(view.info.id, c.id!);
    } catch (err) {
      this._host.flash(trans.__('Could not resume the conversation: %1', (err as Error).message));
      return;
    }
    this.close();
    this._host.flash(trans.__('Conversation resumed: the agent picks it up with your next prompt.'), 'info');
    void this._host.reload();
  }

  /** Show an earlier conversation read-only, with the panel's renderers, instead of the live one. */
  private async _openArchive(view: SessionView, c: IConversationInfo): Promise<void> {
    this.closeMenu();
    const archive = new ArchiveView(view.info);
    this._reading = archive;
    this.archive.dataset.cid = c.id ?? '';
    this._banner.textContent = '';
    const label = el('div', 'jp-ACP-archiveLabel');
    label.append(
      el('strong', '', trans.__('Earlier conversation')),
      el('span', 'jp-ACP-muted', trans.__(' — %1', [when(c), c.agent].filter(Boolean).join(' · ')))
    );
    this._banner.append(
      label,
      button(
        trans.__('Resume'),
        'jp-ACP-archiveResume',
        () => void this._resume(view, c),
        undefined,
        trans.__('Resume: make it the current conversation again')
      ),
      button(
        trans.__('Back'),
        'jp-ACP-archiveBack',
        () => this._closeArchive(),
        undefined,
        trans.__('Back to the current conversation')
      )
    );
    this.archive.textContent = '';
    this.archive.append(this._banner, archive.log);
    this.archive.hidden = false;
    this._host.node.classList.add('jp-ACP-reading');
    archive.log.append(el('div', 'jp-ACP-muted', trans.__('Loading…')));
    try {
      let after = 0;
      for (let page = 0; page < MAX_PAGES; page++) {
        const events = await this._host.api.conversationEvents(view.info.id, c.id!, after);
        if (this._reading !== archive) {
          return;
        }
        if (!Array.isArray(events) || !events.length) {
          break;
        }
        archive.model.applyAll(events);
        after = events[events.length - 1].seq;
      }
    } catch (err) {
      archive.log.textContent = trans.__('Could not read the conversation: %1', (err as Error).message);
      return;
    }
    archive.model.runningTurn = null; // an earlier conversation runs nothing
    archive.log.textContent = '';
    this._renderArchive(archive);
  }

  private _renderArchive(archive: ArchiveView): void {
    if (this._reading !== archive) {
      return;
    }
    const view = archive as unknown as SessionView;
    const ctx: IRenderContext = {
      ...this._host.ctx,
      isShown: v => v === view,
      scheduleRender: v => {
        if (v === view) {
          requestAnimationFrame(() => this._renderArchive(archive));
        }
      },
      resend: () => this._host.flash(trans.__('Resume this conversation to continue it.'), 'info')
    };
    for (const item of archive.model.items) {
      let entry = archive.nodes.get(item.id);
      if (!entry) {
        entry = { node: el('div'), version: -1 };
        entry.node.dataset.kind = item.kind;
        entry.node.dataset.turn = item.turnId ?? '';
        archive.nodes.set(item.id, entry);
        archive.log.append(entry.node);
      }
      if (entry.version !== item.version) {
        entry.version = item.version;
        renderItem(ctx, view, item, entry);
      }
    }
  }

  private _closeArchive(): void {
    const archive = this._reading;
    this._reading = null;
    this.archive.hidden = true;
    this._host.node.classList.remove('jp-ACP-reading');
    if (archive) {
      for (const entry of archive.nodes.values()) {
        try {
          entry.renderer?.dispose();
        } catch {
          // detached already
        }
      }
    }
    this.archive.textContent = '';
  }
}
