/**
 * Pure helpers for the panel's header meter and the background badges: how usage reads, and what the
 * server's session list says is waiting or running, per notebook.
 *
 * No DOM and no JupyterLab imports (node's test runner exercises them; i18n.ts imports only types).
 */
import { trans } from './i18n';
import type { IUsage } from './model';

/** A token count as a short label: 950, 53k, 1.2M. */
export function shortCount(n: number): string {
  if (!Number.isFinite(n)) {
    return '?';
  }
  const a = Math.abs(n);
  if (a < 1000) {
    return String(Math.round(n));
  }
  if (a < 1_000_000) {
    const k = n / 1000;
    return (a < 10_000 ? k.toFixed(1).replace(/\.0$/, '') : String(Math.round(k))) + 'k';
  }
  const m = n / 1_000_000;
  return (a < 10_000_000 ? m.toFixed(1).replace(/\.0$/, '') : String(Math.round(m))) + 'M';
}

/** A cost as the user reads it: "$0.045", "€1.20", "12.5 JPY". */
export function costText(cost: { amount: number; currency: string }): string {
  const amount = cost.amount;
  const digits = Math.abs(amount) >= 1 || amount === 0 ? 2 : Math.abs(amount) >= 0.01 ? 3 : 4;
  const symbols: Record<string, string> = { USD: '$', EUR: '€', GBP: '£' };
  const symbol = symbols[cost.currency.toUpperCase()];
  const value = amount.toFixed(digits);
  return symbol ? `${symbol}${value}` : `${value} ${cost.currency}`;
}

/** The meter's label, fraction and tooltip for a usage report. */
export function usageView(u: IUsage): { label: string; fraction: number; percent: number; tooltip: string } {
  const fraction = Math.max(0, Math.min(1, u.used / u.size));
  const percent = Math.round(fraction * 100);
  let tooltip = trans.__(
    'Context window: %1 of %2 tokens used (%3%%). A new conversation (+) starts it empty.',
    u.used.toLocaleString('en-US'),
    u.size.toLocaleString('en-US'),
    percent
  );
  if (u.cost) {
    tooltip += trans.__(' Cost of this session so far: %1 %2.', u.cost.amount, u.cost.currency);
  }
  return { label: `${shortCount(u.used)} / ${shortCount(u.size)}`, fraction, percent, tooltip };
}

/** What the server's session list (`GET /jupyter-acp/sessions`) says about one session. */
export interface ISessionActivity {
  id: string;
  notebook: string;
  agent: string;
  running: boolean;
  pending: string[];
}

/** A session of the list as activity (fields missing on an older server read as idle). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function activityOf(info: any): ISessionActivity {
  return {
    id: String(info?.id ?? ''),
    notebook: String(info?.notebook ?? ''),
    agent: String(info?.agent ?? ''),
    running: !!info?.turn_id || info?.state === 'busy',
    pending: Array.isArray(info?.pending_permissions) ? info.pending_permissions.map(String) : []
  };
}

/** Per notebook: permission requests waiting and whether a turn runs. */
export interface INotebookActivity {
  pending: number;
  running: boolean;
}

export function byNotebook(sessions: ISessionActivity[]): Map<string, INotebookActivity> {
  const out = new Map<string, INotebookActivity>();
  for (const s of sessions) {
    const a = out.get(s.notebook) ?? { pending: 0, running: false };
    a.pending += s.pending.length;
    a.running = a.running || s.running;
    out.set(s.notebook, a);
  }
  return out;
}

/**
 * A badge: the number of requests waiting (the user must act), else a dot for running work; the
 * words say the same for screen readers and tooltips.
 */
export function badgeOf(a: INotebookActivity | undefined): { text: string; words: string } | null {
  if (!a || (!a.pending && !a.running)) {
    return null;
  }
  if (a.pending) {
    return {
      text: a.pending > 9 ? '9+' : String(a.pending),
      words: trans._n('%1 permission request waiting for you', '%1 permission requests waiting for you', a.pending)
    };
  }
  return { text: '', words: trans.__('the agent is working') };
}

/** Every notebook's activity summed up (the panel's own icon). */
export function total(map: Map<string, INotebookActivity>): INotebookActivity {
  let pending = 0;
  let running = false;
  for (const a of map.values()) {
    pending += a.pending;
    running = running || a.running;
  }
  return { pending, running };
}
