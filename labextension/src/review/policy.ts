/**
 * "Review after" in the header, next to the agent's Mode: the notebook session's own policy for changes to the
 * notebook and runs in its kernel. "Ask each time" leaves the server's configuration in force (by default a card per
 * change); "Review after" (`review`) lets them go ahead under the turn's checkpoint and ends the turn with its review
 * open. What a checkpoint cannot undo (terminals, files written) asks either way. A choice the server's admin does not
 * let users make stays listed, greyed, with the admin's reason (as the Mode picker does).
 *
 * The route: `POST sessions/{id}/policy {policy: "review" | null}`, answered by the session's description (its
 * `policy`); every tab follows the `policy_changed` event's `policy`.
 */
import { el } from '../dom';
import { trans } from '../i18n';
import type { SessionView } from '../session';
import { reasonOf, ReviewApi } from './api';
import type { SessionPolicy } from './types';

/** The picker's choices (a function: translated when called, after the plugin has set the language). */
function choices(): { value: '' | 'review'; name: string; title: string }[] {
  return [
    {
      value: '',
      name: trans.__('Ask each time'),
      title: trans.__(
        "Ask each time: the server's configured policy (by default a card asks before each change to the notebook " +
          'or run in its kernel)'
      )
    },
    {
      value: 'review',
      name: trans.__('Review after'),
      title: trans.__(
        'Review after: the agent changes cells and runs code without a card, under a checkpoint of the turn; the ' +
          'turn ends with its review open (keep, discard, rewind). Terminals and files written still ask.'
      )
    }
  ];
}

/** What the picker needs from the panel. */
export interface IPolicyHost {
  readonly api: ReviewApi;
  flash(text: string, level?: string): void;
  renderChrome(): void;
}

/** The session's own policy: its latest `policy_changed` event, else its description's `policy`. */
function policyOf(view: SessionView): '' | 'review' {
  const fromEvents = view.model.sessionPolicy;
  const value = fromEvents !== undefined ? fromEvents : (view.info as { policy?: unknown }).policy;
  return value === 'review' ? 'review' : '';
}

function forbidden(view: SessionView): string | undefined {
  const fixed = view.info.fixed_by_admin as { policies?: Record<string, string> } | undefined;
  return fixed?.policies?.review;
}

export class PolicyPicker {
  readonly node = el('label', 'jp-ACP-option jp-ACP-policyPicker');
  private _select = el('select', 'jp-ACP-optionSelect');
  private _sig = '';
  private _pending = false;
  private _view: SessionView | null = null;

  constructor(private readonly _host: IPolicyHost) {
    this.node.dataset.option = 'policy';
    this._select.setAttribute('aria-label', trans.__('Permission policy for changes'));
    this.node.append(el('span', 'jp-ACP-optionLabel', trans.__('Changes')), this._select);
    this._select.addEventListener('change', () => void this._set(this._select.value === 'review' ? 'review' : null));
    this.node.hidden = true;
  }

  render(view: SessionView | null): void {
    this._view = view;
    const current = view ? policyOf(view) : '';
    const why = view ? forbidden(view) : undefined;
    const sig = JSON.stringify([view?.info.id ?? '', current, this._pending, !!view?.readOnly, why ?? '']);
    if (sig === this._sig) {
      return;
    }
    this._sig = sig;
    this.node.hidden = !view;
    if (!view) {
      return;
    }
    const sel = this._select;
    sel.textContent = '';
    const all = choices();
    for (const c of all) {
      const blocked = c.value === 'review' && current !== 'review' && why;
      const o = el('option', '', blocked ? trans.__('%1 (not allowed by your admin)', c.name) : c.name);
      o.value = c.value;
      o.title = blocked ? trans.__('Set by your admin: %1', why) : c.title;
      o.disabled = !!blocked;
      if (blocked) {
        o.dataset.fixedByAdmin = why;
      }
      sel.appendChild(o);
    }
    sel.value = current;
    sel.disabled = this._pending || !!view.readOnly;
    sel.setAttribute('aria-busy', String(this._pending));
    this.node.title = all.find(c => c.value === current)?.title ?? '';
  }

  private async _set(policy: SessionPolicy): Promise<void> {
    const view = this._view;
    if (!view) {
      return;
    }
    const name = choices().find(c => c.value === (policy ?? ''))?.name ?? String(policy);
    this._pending = true;
    this.render(view);
    try {
      const now = await this._host.api.setPolicy(view.info.id, policy);
      view.model.sessionPolicy = now;
    } catch (err) {
      this._host.flash(trans.__('%1. It stays as it was.', reasonOf(err, trans.__('Could not switch to “%1”', name))));
    } finally {
      this._pending = false;
      this._sig = '';
      this.render(view);
      this._host.renderChrome();
    }
  }
}
