/** Each item of the log to its renderer. */
import type { Item } from '../model';
import type { IEntry, SessionView } from '../session';
import type { IRenderContext } from './context';
import { renderElicitation } from './elicitation';
import { renderAudit, renderMessage, renderThought, renderUser } from './messages';
import { renderNotice, renderTurnEnd } from './notices';
import { renderPlan } from './plans';
import { renderTool } from './tools';

export type { IRenderContext } from './context';

export function renderItem(ctx: IRenderContext, view: SessionView, item: Item, entry: IEntry): void {
  try {
    renderItemUnsafe(ctx, view, item, entry);
  } catch (err) {
    // one item the sidebar cannot show must not take the conversation with it
    console.warn('jupyter-acp-host: could not render an item', item.kind, err);
    entry.node.className = 'jp-ACP-item jp-ACP-notice jp-mod-warning';
    entry.node.textContent = `(this ${item.kind} could not be shown: ${(err as Error).message})`;
  }
}

function renderItemUnsafe(ctx: IRenderContext, view: SessionView, item: Item, entry: IEntry): void {
  switch (item.kind) {
    case 'user':
      return renderUser(ctx, item, entry);
    case 'message':
      return renderMessage(ctx, view, item, entry);
    case 'thought':
      return renderThought(view, item, entry);
    case 'tool':
      return renderTool(ctx, view, item, entry);
    case 'plan':
      return renderPlan(item, entry);
    case 'turn_end':
      return renderTurnEnd(ctx, view, item, entry);
    case 'notice':
      return renderNotice(ctx, view, item, entry);
    case 'audit':
      return renderAudit(item, entry);
    case 'elicitation':
      return renderElicitation(ctx, view, item, entry);
    default:
      entry.node.hidden = true; // a kind this view does not know
  }
}
