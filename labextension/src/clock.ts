/**
 * The running turn's clock: the time the agent worked, paused while it waits for the user (a permission card, a
 * question). A clock that kept counting while the card waited made a turn look slow that was waiting on the user.
 *
 * No JupyterLab imports (node's test runner checks it).
 */
export class TurnClock {
  private _turn: string | null = null;
  /** Seconds already spent waiting for the user in this turn. */
  private _waited = 0;
  /** When the current wait began (null: not waiting). */
  private _since: number | null = null;

  /** Seconds the agent has worked on `turn` (started at `started`) by `now`; frozen while `waiting`. */
  read(turn: string, started: number, now: number, waiting: boolean): number {
    if (turn !== this._turn) {
      this._turn = turn;
      this._waited = 0;
      this._since = null;
    }
    if (waiting && this._since === null) {
      this._since = now;
    } else if (!waiting && this._since !== null) {
      this._waited += now - this._since;
      this._since = null;
    }
    return Math.max(0, (this._since ?? now) - started - this._waited);
  }
}
