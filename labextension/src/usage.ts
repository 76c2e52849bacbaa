/**
 * The header's context meter (the agent's `usage_update`: tokens used of the context window, and the
 * session's cost), and the keyboard shortcuts shown on a permission card's buttons.
 */
import { CommandRegistry } from '@lumino/commands';

import { el } from './dom';
import { trans } from './i18n';
import type { IUsage } from './model';
import { costText, usageView } from './summary';

/** Commands that answer the shown conversation's pending request (index.ts registers them). */
export const ALLOW_COMMAND = 'jupyter-acp:allow-pending';
export const REJECT_COMMAND = 'jupyter-acp:reject-pending';

export class UsageMeter {
  readonly node = el('div', 'jp-ACP-usage');
  private _bar = el('div', 'jp-ACP-usageBar');
  private _fill = el('div', 'jp-ACP-usageFill');
  private _label = el('span', 'jp-ACP-usageLabel');
  private _cost = el('span', 'jp-ACP-usageCost');

  constructor() {
    this._bar.appendChild(this._fill);
    this._bar.setAttribute('role', 'meter');
    this._bar.setAttribute('aria-valuemin', '0');
    this._bar.setAttribute('aria-valuemax', '100');
    this._bar.setAttribute('aria-label', trans.__('Context window used'));
    this.node.append(this._bar, this._label, this._cost);
    this.node.hidden = true;
  }

  render(usage: IUsage | null): void {
    if (!usage) {
      this.node.hidden = true;
      return;
    }
    const v = usageView(usage);
    this.node.hidden = false;
    this.node.title = v.tooltip;
    this.node.dataset.level = v.fraction >= 0.9 ? 'high' : v.fraction >= 0.7 ? 'warn' : 'ok';
    this._fill.style.width = `${v.percent}%`;
    this._bar.setAttribute('aria-valuenow', String(v.percent));
    this._bar.setAttribute('aria-valuetext', trans.__('%1%% (%2 tokens)', v.percent, v.label));
    this._label.textContent = v.label;
    this._cost.hidden = !usage.cost;
    this._cost.textContent = usage.cost ? costText(usage.cost) : '';
    this._cost.title = usage.cost
      ? trans.__('Cost of this session so far: %1 %2', usage.cost.amount, usage.cost.currency)
      : '';
  }
}

/** The first key binding of a command as the user reads it ("Alt+Shift+A"), or ''. */
export function shortcutOf(commands: CommandRegistry | undefined, command: string): string {
  const binding = commands?.keyBindings.find(b => b.command === command);
  return binding ? binding.keys.map(k => CommandRegistry.formatKeystroke(k)).join(', ') : '';
}

/** A lumino keystroke ("Accel Shift A") in `aria-keyshortcuts` form ("Control+Shift+A"). */
function ariaKeys(keys: string): string {
  const mac = /Mac/i.test(navigator.platform);
  return keys
    .trim()
    .split(/\s+/)
    .map(k => (k === 'Accel' ? (mac ? 'Meta' : 'Control') : k === 'Ctrl' ? 'Control' : k === 'Cmd' ? 'Meta' : k))
    .join('+');
}

/**
 * Show the shortcuts on a pending permission card: the "allow once" and "reject" buttons (the ones the
 * commands press) get a key hint and `aria-keyshortcuts`. Idempotent: a re-rendered card is decorated again.
 */
export function decorateShortcuts(node: HTMLElement, commands: CommandRegistry | undefined): void {
  for (const card of node.querySelectorAll<HTMLElement>('.jp-ACP-permission:not(.jp-mod-resolved)')) {
    const buttons = [...card.querySelectorAll<HTMLButtonElement>('button[data-option-kind]')];
    for (const [family, command] of [
      ['allow', ALLOW_COMMAND],
      ['reject', REJECT_COMMAND]
    ] as const) {
      const keys = shortcutOf(commands, command);
      const aria = commands?.keyBindings.find(b => b.command === command)?.keys[0] ?? '';
      const target =
        buttons.find(b => b.dataset.optionKind === `${family}_once`) ??
        buttons.find(b => b.dataset.optionKind?.startsWith(family));
      if (!keys || !target || target.dataset.shortcut) {
        continue;
      }
      // drawn by CSS (::after) from the attribute: the button's text stays the kind's short label
      target.dataset.shortcut = keys;
      target.setAttribute('aria-keyshortcuts', ariaKeys(aria));
      // the accessible name holds the visible text, the shortcut included
      target.setAttribute('aria-label', `${target.getAttribute('aria-label') ?? target.textContent ?? ''} ${keys}`);
      target.title = trans.__('%1 Shortcut: %2.', target.title, keys);
    }
  }
}
