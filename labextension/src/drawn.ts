/**
 * Which items of a conversation are drawn: the latest ones, and older ones as the user scrolls up to them.
 *
 * A session's history page can hold thousands of events (hundreds of turns with code blocks): drawing every item
 * froze the page for seconds when a notebook opened (each answer's markdown rendered, each render measuring the whole
 * log) and kept tens of thousands of elements in the sidebar. The model still holds the whole page (it is what the
 * server sent, and small); the DOM holds a window of it: the last `DRAWN` items when the conversation opens or
 * follows its end, `STEP` more above each time the user reaches the top of what is drawn. Items that leave the
 * window (the user follows a long stream at the bottom) are dropped and drawn again if scrolled back to.
 *
 * No JupyterLab imports (node's test runner checks the arithmetic).
 */

/** Items drawn when a conversation opens or follows its end. */
export const DRAWN = 40;
/** Items drawn more above each time the user reaches the top of what is drawn. */
export const STEP = 30;
/** How far back a window's first item may move to start at a prompt (a turn is not cut when it can be helped). */
const SNAP = 24;

export interface IDrawnItem {
  id: string;
  kind: string;
}

/** What the panel remembers of one conversation's window. */
export interface IDrawnState {
  /** The first drawn item's id (null: the latest `DRAWN`). */
  firstId: string | null;
  /** How many items were drawn, counted from the end (where the window is when its first item went away). */
  fromEnd: number;
  /** Everything the model held was drawn: older items that arrive (a page from the server) are drawn too. */
  all: boolean;
}

export function drawnState(): IDrawnState {
  return { firstId: null, fromEnd: 0, all: false };
}

/** Back to the nearest prompt at or above `i` (within `SNAP` items), so a window starts at a turn's beginning. */
function snap(items: readonly IDrawnItem[], i: number): number {
  for (let j = Math.min(i, items.length - 1); j >= 0 && j > i - SNAP; j--) {
    if (items[j].kind === 'user') {
      return j;
    }
  }
  return i;
}

/**
 * The index of the first item to draw, and the state updated to it.
 *
 * `following`: the user reads the end (the log sticks to the bottom): a window grown past twice `DRAWN` by new
 * turns is cut back to the latest `DRAWN`, so a long session does not accumulate elements.
 */
export function firstDrawn(items: readonly IDrawnItem[], state: IDrawnState, following: boolean): number {
  const n = items.length;
  let start = state.firstId === null ? -1 : items.findIndex(i => i.id === state.firstId);
  if (start < 0) {
    start = snap(items, Math.max(0, n - (state.firstId === null ? DRAWN : Math.max(DRAWN, state.fromEnd))));
  } else if (state.all && start > 0) {
    start = snap(items, Math.max(0, start - STEP)); // an older page arrived while all was drawn: draw some of it
  }
  if (following && n - start > 2 * DRAWN) {
    start = snap(items, n - DRAWN);
  }
  set(items, state, start);
  return start;
}

/** Draw `STEP` more items above the window; false when it starts at the first item already. */
export function revealAbove(items: readonly IDrawnItem[], state: IDrawnState): boolean {
  const start = firstDrawn(items, state, false);
  if (start === 0) {
    return false;
  }
  set(items, state, snap(items, Math.max(0, start - STEP)));
  return true;
}

/** Draw from item `id` on (a turn scrolled to from elsewhere); false when the model does not hold it. */
export function revealFrom(items: readonly IDrawnItem[], state: IDrawnState, id: string): boolean {
  const i = items.findIndex(item => item.id === id);
  if (i < 0) {
    return false;
  }
  if (i < firstDrawn(items, state, false)) {
    set(items, state, i);
  }
  return true;
}

function set(items: readonly IDrawnItem[], state: IDrawnState, start: number): void {
  state.firstId = items[start]?.id ?? null;
  state.fromEnd = items.length - start;
  state.all = start === 0;
}
