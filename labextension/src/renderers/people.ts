/** Who did it, on screen: the small muted line that names another person (their colour's dot) and the time. */
import { el } from '../dom';
import { IActor, byline, isViewer, safeColor } from '../people';

/**
 * "● Bob Dylan · 14:02" for what someone other than the viewer did (or the magic, the server), null for the viewer's
 * own actions and for events that name nobody (an older server's): the viewer's own prompt stays as it always was.
 */
export function byLine(
  actor: IActor | undefined,
  me: string | null,
  at: number | undefined,
  className: string
): HTMLElement | null {
  if (!actor || isViewer(actor, me)) {
    return null;
  }
  const line = el('div', `jp-ACP-by ${className}`);
  const color = actor.kind === 'user' ? safeColor(actor.color) : null;
  const mark = el('span', 'jp-ACP-byMark');
  mark.setAttribute('aria-hidden', 'true');
  if (color) {
    mark.style.background = color;
  } else {
    mark.classList.add('jp-mod-none');
  }
  line.appendChild(mark);
  line.appendChild(el('span', 'jp-ACP-byText', byline(actor, me, at)));
  if (actor.kind === 'user' && actor.username) {
    line.dataset.user = actor.username;
    line.title =
      actor.display_name && actor.display_name !== actor.username
        ? `${actor.display_name} (${actor.username})`
        : actor.username;
  }
  return line;
}
