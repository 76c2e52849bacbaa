/**
 * Who did it, in words: the `actor` an event carries (wire.ts `IActor`: a person's Jupyter identity, or the magic,
 * the server, the agent) as the panel says it to the viewer: "Bob Dylan allowed · 14:02", "You allowed · 14:02".
 *
 * Two people sharing a server (a JupyterHub share, jupyter-collaboration) share a notebook's session: without these a
 * prompt of bob's shows in alice's panel as if it were hers and nobody knows who answered a card. Pure functions (no
 * DOM, no JupyterLab) so node's test runner checks the words; the viewer is named by their username (JupyterLab's
 * `serviceManager.user.identity`), given by the panel.
 */
import { trans } from './i18n';
import type { IActor } from './wire';

export type { IActor } from './wire';

/** An event's `actor` as it arrived (an older server sends none; anything malformed is treated as none). */
export function actorOf(raw: unknown): IActor | undefined {
  if (!raw || typeof raw !== 'object') {
    return undefined;
  }
  const a = raw as Record<string, unknown>;
  if (typeof a.kind !== 'string') {
    return undefined;
  }
  const text = (v: unknown) => (typeof v === 'string' && v ? v : undefined);
  return {
    kind: a.kind as IActor['kind'],
    username: text(a.username),
    display_name: text(a.display_name),
    color: text(a.color) ?? null
  };
}

/** Whether the actor is the viewer themself (then the panel says "You"). */
export function isViewer(actor: IActor | undefined, me: string | null | undefined): boolean {
  return !!actor && actor.kind === 'user' && !!me && actor.username === me;
}

/** A person acted, and it was not the viewer: their prompt bubble is marked with their name. */
export function isSomeoneElse(actor: IActor | undefined, me: string | null | undefined): boolean {
  return !!actor && actor.kind === 'user' && !isViewer(actor, me);
}

/** The actor's name as a sentence's subject: "You", "Bob Dylan", "The %%acp magic", "The server", "The agent". */
export function actorName(actor: IActor, me: string | null | undefined): string {
  if (isViewer(actor, me)) {
    return trans.__('You');
  }
  switch (actor.kind) {
    case 'user':
      return actor.display_name || actor.username || trans.__('Someone');
    case 'magic':
      return trans.__('The %%acp magic');
    case 'server':
      return trans.__('The server');
    case 'agent':
      return trans.__('The agent');
    default:
      return trans.__('Someone');
  }
}

/** An event's time (seconds since the epoch) as the viewer's local 24-hour clock: "14:02". */
export function clockTime(ts: number): string {
  const d = new Date(ts * 1000);
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
}

/** What a card's answer was, for its byline. */
export type Answer = 'allowed' | 'rejected' | 'answered' | 'declined' | 'cancelled';

/**
 * Who answered a card and when: "Bob Dylan allowed · 14:02", "You rejected · 09:15". Whole sentences per answer (a
 * language pack orders the words its own way); without a time (an older event) only the words.
 */
export function answeredBy(answer: Answer, actor: IActor, me: string | null | undefined, ts?: number): string {
  const who = actorName(actor, me);
  const you = isViewer(actor, me);
  let words: string;
  switch (answer) {
    case 'allowed':
      words = you ? trans.__('You allowed') : trans.__('%1 allowed', who);
      break;
    case 'rejected':
      words = you ? trans.__('You rejected') : trans.__('%1 rejected', who);
      break;
    case 'declined':
      words = you ? trans.__('You declined') : trans.__('%1 declined', who);
      break;
    case 'cancelled':
      words = you ? trans.__('You cancelled') : trans.__('%1 cancelled', who);
      break;
    default:
      words = you ? trans.__('You answered') : trans.__('%1 answered', who);
  }
  return typeof ts === 'number' ? trans.__('%1 · %2', words, clockTime(ts)) : words;
}

/** A prompt's or a change's byline: "Bob Dylan · 14:02", "You · 14:02". */
export function byline(actor: IActor, me: string | null | undefined, ts?: number): string {
  const who = actorName(actor, me);
  return typeof ts === 'number' ? trans.__('%1 · %2', who, clockTime(ts)) : who;
}

/**
 * A colour an identity gives is a CSS colour or one of JupyterLab's variables (`var(--jp-collaborator-color3)`):
 * anything else (a server's typo, markup) is not put in a style.
 */
export function safeColor(color: string | null | undefined): string | null {
  if (!color) {
    return null;
  }
  return /^(#[0-9a-fA-F]{3,8}|var\(--[\w-]+\)|[a-zA-Z]+|(rgb|hsl)a?\([\d\s.,%/]+\))$/.test(color) ? color : null;
}
