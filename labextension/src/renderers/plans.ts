/** The agent's plan: its entries and their state, in the log and as a sticky strip above the input. */
import { el } from '../dom';
import type { IPlanEntry, IPlanItem } from '../model';
import type { IEntry, SessionView } from '../session';

function mark(status: string): string {
  return status === 'completed' ? '✓' : status === 'in_progress' ? '◐' : '○';
}

function planList(entries: IPlanEntry[]): HTMLUListElement {
  const ul = el('ul', 'jp-ACP-planList');
  ul.setAttribute('aria-label', 'Plan');
  for (const e of entries) {
    const status = e.status ?? 'pending';
    const li = el('li', `jp-ACP-planEntry jp-mod-${status}`);
    li.append(el('span', 'jp-ACP-planMark', mark(status)), el('span', '', e.content));
    li.setAttribute('aria-label', `${e.content} (${status.replace('_', ' ')})`);
    ul.appendChild(li);
  }
  return ul;
}

export function renderPlan(item: IPlanItem, entry: IEntry): void {
  const n = entry.node;
  n.className = 'jp-ACP-item jp-ACP-plan';
  n.textContent = '';
  n.appendChild(el('div', 'jp-ACP-planTitle', 'Plan'));
  n.appendChild(planList(item.entries));
}

/**
 * Where a plan stands: the step being worked on (the first in progress, else the first not done),
 * "2 of 3", and whether every step is done.
 */
export function planProgress(entries: IPlanEntry[]): { index: number; total: number; current: string; done: boolean } {
  const total = entries.length;
  const done = total > 0 && entries.every(e => e.status === 'completed');
  let i = entries.findIndex(e => e.status === 'in_progress');
  if (i < 0) {
    i = entries.findIndex(e => (e.status ?? 'pending') !== 'completed');
  }
  if (i < 0) {
    i = total - 1;
  }
  return { index: i + 1, total, current: entries[i]?.content ?? '', done };
}

/**
 * What the strip says of a plan: while its turn runs, the step worked on ("2 of 3 · Load the data"); once the turn
 * ended with steps not done, how far it got ("1 of 3 done · stopped"): the step it was on is no longer being worked
 * on, and saying "1 of 3" as if it were misled the user into waiting.
 */
export function planStripText(
  entries: IPlanEntry[],
  running: boolean
): { count: string; current: string; words: string; stopped: boolean } {
  const p = planProgress(entries);
  if (p.done) {
    return {
      count: `${p.total} of ${p.total} done`,
      current: '',
      words: `plan: all ${p.total} steps done`,
      stopped: false
    };
  }
  if (!running) {
    const done = entries.filter(e => e.status === 'completed').length;
    return {
      count: `${done} of ${p.total} done`,
      current: ' · stopped',
      words: `plan: ${done} of ${p.total} done · stopped when the turn ended`, // the visible words lead
      stopped: true
    };
  }
  return {
    count: `${p.index} of ${p.total}`,
    current: ` · ${p.current}`,
    words: `plan: step ${p.index} of ${p.total}, ${p.current}`,
    stopped: false
  };
}

/**
 * The plan to keep in sight: the running turn's latest plan, or the conversation's latest plan while
 * it has steps not done (a turn that ended half-way). Null when there is none to show.
 */
export function stickyPlan(view: SessionView | null): IPlanItem | null {
  const model = view?.model;
  if (!model) {
    return null;
  }
  for (let i = model.items.length - 1; i >= 0; i--) {
    const item = model.items[i];
    if (item.kind !== 'plan' || !item.entries.length) {
      continue;
    }
    if (model.runningTurn && item.turnId === model.runningTurn) {
      return item;
    }
    return planProgress(item.entries).done ? null : item;
  }
  return null;
}

/**
 * The sticky plan strip above the input: "2 of 3 · current step", a toggle that shows the whole plan.
 * It follows the plan's updates (each render reads the latest plan item).
 */
export class PlanStrip {
  readonly node = el('div', 'jp-ACP-planStrip');
  private _open = false;
  private _toggle = el('button', 'jp-ACP-planStripToggle');
  private _list = el('div', 'jp-ACP-planStripList');
  private _shown = '';

  constructor() {
    this.node.hidden = true;
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'Plan progress');
    this._toggle.type = 'button';
    this._toggle.addEventListener('click', () => {
      this._open = !this._open;
      this._shown = '';
      this._sync();
    });
    this.node.append(this._toggle, this._list);
  }

  private _plan: IPlanItem | null = null;
  /** The plan's turn is running (else it ended with steps not done). */
  private _running = false;

  render(view: SessionView | null): void {
    this._plan = stickyPlan(view);
    this._running = !!this._plan && view?.model.runningTurn === this._plan.turnId;
    this._sync();
  }

  private _sync(): void {
    const plan = this._plan;
    this.node.hidden = !plan;
    if (!plan) {
      this._shown = '';
      return;
    }
    const key = `${plan.id}:${plan.version}:${this._open}:${this._running}`;
    if (key === this._shown) {
      return; // re-rendered on every event: touch the DOM only when the plan changed
    }
    this._shown = key;
    const { count, current, words, stopped } = planStripText(plan.entries, this._running);
    this.node.classList.toggle('jp-mod-stopped', stopped);
    this._toggle.textContent = '';
    this._toggle.append(
      el('span', 'jp-ACP-planStripCaret', this._open ? '▾' : '▸'),
      el('span', 'jp-ACP-planStripCount', count),
      el('span', 'jp-ACP-planStripCurrent', current)
    );
    this._toggle.setAttribute('aria-expanded', String(this._open));
    this._toggle.title = `${words} (${this._open ? 'hide' : 'show'} the whole plan)`;
    this._toggle.setAttribute('aria-label', this._toggle.title);
    this._list.textContent = '';
    this._list.hidden = !this._open;
    if (this._open) {
      this._list.appendChild(planList(plan.entries));
    }
  }
}
