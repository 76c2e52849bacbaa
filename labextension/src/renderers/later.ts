/**
 * The answers' first renders, one after another while the page is idle.
 *
 * Opening a long conversation draws its latest forty items, scrolling up thirty older ones at once: each answer's
 * markdown parsed, sanitized, its code highlighted, all in one task (bench/panel_history.py, traced: tasks of the
 * panel's own of 170 to 260 ms at a 300-turn open, and the frames that drew thirty older answers made the scroll's
 * p95 33 ms). Queued here, the latest of them renders at once (in the task that drew it) and the others when the page is idle, as many as a
 * frame's idle time holds: the page draws, scrolls and types between them.
 *
 * No JupyterLab imports (node's test runner checks the order).
 */

/** The least idle time left for one more render (ms). */
export const IDLE_LEFT_MS = 4;

/** At most this long (ms) before a busy page renders the next one anyway (one a task). */
export const IDLE_TIMEOUT_MS = 200;

type Job = () => Promise<void>;

const waiting: Job[] = [];
let pumping = false;

/**
 * Queue a render. The latest queued goes first: the answer nearest the end of the log (the one read at an open), or
 * nearest what the reader reached (the older items drawn above it, the nearest last). A job never rejects (a render
 * that fails shows the text); one that does is skipped.
 */
export function later(job: Job): void {
  waiting.push(job);
  if (!pumping) {
    pumping = true;
    void pump();
  }
}

/** Whether renders are waiting (tests). */
export function pending(): number {
  return waiting.length;
}

async function run(job: Job | undefined): Promise<void> {
  try {
    await job?.();
  } catch (err) {
    console.warn('jupyter-acp-host: a render failed', err);
  }
}

async function pump(): Promise<void> {
  try {
    // once the drawing that queued them returns (it queues in the log's order), the latest at once, in the same task:
    // the answer read at an open, the one nearest a scroll up
    await Promise.resolve();
    await run(waiting.pop());
    while (waiting.length) {
      const deadline = await idle();
      while (waiting.length) {
        await run(waiting.pop());
        if (deadline.timeRemaining() < IDLE_LEFT_MS) {
          break; // (a render that awaited past the idle period finds no time left)
        }
      }
    }
  } finally {
    pumping = false;
  }
}

interface IDeadline {
  timeRemaining(): number;
}

/** The page's next idle period (without requestIdleCallback: the next task, with 8 ms to spend). */
function idle(): Promise<IDeadline> {
  return new Promise(resolve => {
    const ric = (globalThis as { requestIdleCallback?: (cb: (d: IDeadline) => void, o: { timeout: number }) => number })
      .requestIdleCallback;
    if (ric) {
      ric(resolve, { timeout: IDLE_TIMEOUT_MS });
    } else {
      const until = performance.now() + 8;
      setTimeout(() => resolve({ timeRemaining: () => Math.max(0, until - performance.now()) }), 0);
    }
  });
}
