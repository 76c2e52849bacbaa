/**
 * A permission card: the question, the preview of what the tool would do, one button per option;
 * once answered, what was answered.
 */
import { button, el, pretty } from '../dom';
import { IPermission, IToolItem, optionOrder } from '../model';
import type { SessionView } from '../session';
import type { IRenderContext } from './context';
import { diff, textPreview } from './diff';
import { KIND_LABEL, optionLabels } from '../owntools';
import { Answer, answeredBy } from '../people';

/**
 * What a permission button says: its ACP kind decides, never the agent's wording (an option named
 * "Reject" may carry kind allow_once: the agent writes the labels), made distinct where two options share a kind
 * (`owntools.optionLabels`). The agent's name is shown as secondary text.
 */
export { KIND_LABEL };

function kindClass(kind: string | undefined): string {
  return kind?.startsWith('reject') ? 'jp-mod-reject' : kind?.startsWith('allow') ? 'jp-mod-allow' : 'jp-mod-neutral';
}

/** The agent's wording adds something only when it is not (part of) the kind's label already. */
function saysMore(name: string | undefined, label: string): boolean {
  const norm = (t: string) => t.toLowerCase().replace(/[^a-z]/g, '');
  return !!name && !!norm(name) && !norm(label).includes(norm(name));
}

export function permission(ctx: IRenderContext, view: SessionView, tool: IToolItem, perm: IPermission): HTMLElement {
  const box = el('div', 'jp-ACP-permission');
  box.dataset.requestId = perm.requestId;
  if (perm.resolved) {
    box.classList.add('jp-mod-resolved');
    let text: string;
    let answer: Answer = 'cancelled';
    if (perm.resolved.cancelled) {
      text = 'Permission request cancelled (the turn ended or was stopped).';
    } else {
      const opt = perm.options.find(o => o.optionId === perm.resolved!.optionId);
      const kind = opt?.kind ?? '';
      const name = opt?.name ?? perm.resolved.optionId ?? '';
      const label = opt ? optionLabels(perm.options).get(opt.optionId) : undefined;
      answer = !label ? 'answered' : kind.startsWith('reject') ? 'rejected' : 'allowed';
      text = label
        ? `${kind.startsWith('reject') ? 'Rejected' : 'Allowed'}: ${label}` +
          (saysMore(name, label) && perm.source !== 'client' ? ` (the agent's option “${name}”)` : '')
        : `Answered “${name}” (an option of unknown kind ${kind || 'none'})`;
      if (kind === 'allow_always' && perm.source === 'client') {
        text += " in this notebook's session (× in the header undoes it)";
      } else if (kind === 'allow_always' && perm.wording === 'client') {
        text += "; this notebook's session runs this tool without asking too (× in the header undoes it)";
      }
      box.classList.add(
        kind.startsWith('reject') ? 'jp-mod-rejected' : kind.startsWith('allow') ? 'jp-mod-allowed' : 'jp-mod-neutral'
      );
    }
    const result = el('div', 'jp-ACP-permissionResult', text);
    const actor = perm.resolved.actor;
    if (actor) {
      // who answered and when, also on the viewer's own answers: a shared session's cards are anyone's to answer
      const by = el('span', 'jp-ACP-permissionBy', answeredBy(answer, actor, ctx.me(), perm.resolved.at));
      if (actor.kind === 'user' && actor.username) {
        by.dataset.user = actor.username;
      }
      result.appendChild(by);
    }
    box.appendChild(result);
    return box;
  }
  // asked on the agent's card, the gate's own words win over whatever the agent's updates say
  const title = perm.own ? perm.own.title : tool.title;
  const content = perm.own ? perm.own.content : tool.content;
  const rawInput = perm.own ? perm.own.rawInput : tool.rawInput;
  box.setAttribute('role', 'group');
  box.setAttribute('aria-label', `Permission requested: ${title}`);
  box.appendChild(el('div', 'jp-ACP-permissionQuestion', `The agent asks to run “${title}”.`));
  // what the tool would do: the preview (a diff, a command) if any, else its arguments
  const preview = content
    .filter(c => c?.type === 'content' && c.content?.type === 'text')
    .map(c => c.content.text as string)
    .join('\n');
  if (perm.own) {
    // the card's own body shows the agent's content: the gate's diff goes with its question
    for (const c of content) {
      if (c?.type === 'diff') {
        box.appendChild(diff(c));
      }
    }
  }
  if (preview) {
    box.appendChild(textPreview(preview));
  } else if (rawInput !== undefined && !content.some(c => c?.type === 'diff')) {
    box.appendChild(el('pre', 'jp-ACP-pre', pretty(rawInput)));
  }
  const row = el('div', 'jp-ACP-permissionOptions');
  const fixedReasons = new Set<string>();
  const labels = optionLabels(perm.options);
  for (const opt of optionOrder(perm.options)) {
    const known = labels.get(opt.optionId);
    const label = known ?? `“${opt.name}”`;
    const more = known && saysMore(opt.name, known);
    let title = known
      ? `${label}. ${perm.source === 'client' ? 'In full' : 'The agent calls this option'}: “${opt.name}”.`
      : `The agent's option “${opt.name}” has an unknown kind (${opt.kind || 'none'}): what it does is up to the agent.`;
    if (opt.kind === 'allow_always') {
      title +=
        perm.source === 'client'
          ? " This tool then runs without asking in this notebook's session; × in the panel's header undoes it."
          : ' The agent keeps this choice itself: what "always" covers is up to the agent.' +
            (perm.wording === 'client'
              ? " This notebook's session also runs this tool without asking; × in the panel's header undoes that."
              : '');
    }
    const b = button(label, `jp-ACP-option jp-ACP-permissionOption ${kindClass(opt.kind)}`, () => {
      row.querySelectorAll('button').forEach(x => ((x as HTMLButtonElement).disabled = true));
      ctx.api.answer(view.info.id, perm.requestId, opt.optionId).catch(err => {
        row
          .querySelectorAll('button:not([data-fixed-by-admin])')
          .forEach(x => ((x as HTMLButtonElement).disabled = false));
        ctx.flash(`Could not answer: ${(err as Error).message}`, 'error');
      });
    });
    b.dataset.optionId = opt.optionId;
    b.dataset.optionKind = opt.kind;
    b.title = title;
    const fixed = typeof opt.fixed_by_admin === 'string' ? opt.fixed_by_admin : '';
    if (fixed) {
      // the server's admin does not let users pick this policy: greyed, the reason beside the buttons
      b.disabled = true;
      b.dataset.fixedByAdmin = 'true';
      b.title = `Set by your admin: ${fixed}`;
      fixedReasons.add(fixed);
    }
    b.setAttribute(
      'aria-label',
      more ? `${label} (${perm.source === 'client' ? '' : "the agent's words: "}“${opt.name}”)` : label
    );
    if (more && perm.source !== 'client') {
      // an agent's own words beside the kind's label (never instead of it); the client's own wording is in the tooltip
      b.appendChild(el('span', 'jp-ACP-optionAgentName', `“${opt.name}”`));
    }
    row.appendChild(b);
  }
  if (!perm.options.length) {
    row.appendChild(el('span', 'jp-ACP-muted', 'The agent offered no options.'));
  }
  for (const why of fixedReasons) {
    row.appendChild(el('span', 'jp-ACP-permissionFixed', `Set by your admin: ${why}`));
  }
  box.appendChild(row);
  return box;
}
