/** The agent's plan: its entries and their state. */
import { el } from '../dom';
import type { IPlanItem } from '../model';
import type { IEntry } from '../session';

export function renderPlan(item: IPlanItem, entry: IEntry): void {
  const n = entry.node;
  n.className = 'jp-ACP-item jp-ACP-plan';
  n.textContent = '';
  n.appendChild(el('div', 'jp-ACP-planTitle', 'Plan'));
  const ul = el('ul', 'jp-ACP-planList');
  ul.setAttribute('aria-label', 'Plan');
  for (const e of item.entries) {
    const status = e.status ?? 'pending';
    const li = el('li', `jp-ACP-planEntry jp-mod-${status}`);
    const mark = status === 'completed' ? '✓' : status === 'in_progress' ? '◐' : '○';
    li.append(el('span', 'jp-ACP-planMark', mark), el('span', '', e.content));
    li.setAttribute('aria-label', `${e.content} (${status.replace('_', ' ')})`);
    ul.appendChild(li);
  }
  n.appendChild(ul);
}
