/**
 * An agent terminal inside the tool card that embeds it (`{type: "terminal", terminalId}`): the command,
 * its output live (the tail the server streams), its exit, and "Open terminal" to open that very terminal
 * in JupyterLab while it runs.
 */
import { TerminalAPI } from '@jupyterlab/services';
import { terminalIcon } from '@jupyterlab/ui-components';

import { button, el } from '../dom';
import type { ITerminalState } from '../model';
import type { IRenderContext } from './context';

function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, "'\\''")}'`;
}

/** The command line as a shell would show it. */
export function commandLine(state: ITerminalState): string {
  return [state.command, ...state.args.map(quote)].join(' ');
}

/** "running", "exit 0", "exit 3", "killed (SIGTERM)". */
export function exitLabel(state: ITerminalState | undefined): string {
  if (!state) {
    return 'not a terminal of this client'; // an id the server never reported (another client's, or made up)
  }
  const status = state.exitStatus;
  if (!status) {
    return state.released ? 'released' : 'running';
  }
  if (status.signal) {
    return `stopped (${status.signal})`;
  }
  return `exit ${status.exitCode ?? '?'}`;
}

/**
 * `terminal:open` starts a new shell under a name that no longer runs: open it only while it does (a card
 * replayed after a server restart may still say "running").
 */
async function openIfRunning(ctx: IRenderContext, name: string): Promise<void> {
  try {
    const running = await TerminalAPI.listRunning(ctx.api.settings);
    if (!running.some(t => t.name === name)) {
      ctx.flash(`Terminal ${name} has ended; its output stays in the card`, 'warning');
      return;
    }
  } catch {
    ctx.flash('Could not list the running terminals', 'warning');
    return;
  }
  ctx.openTerminal(name);
}

export function renderTerminal(
  ctx: IRenderContext,
  terminalId: string,
  state: ITerminalState | undefined,
  agents = false
): HTMLElement {
  const box = el('div', 'jp-ACP-terminal');
  box.dataset.terminalId = terminalId;
  // `agents`: a command the agent ran itself (its card's terminal), not one of the client's Jupyter terminals
  box.classList.toggle('jp-mod-agentTerminal', agents);
  const running = !!state && !state.exitStatus && !state.released;
  box.classList.toggle('jp-mod-running', running);
  const head = el('div', 'jp-ACP-terminalHead');
  head.appendChild(terminalIcon.element({ tag: 'span', className: 'jp-ACP-terminalIcon' }));
  const line = state ? commandLine(state) : terminalId;
  const cmd = el('code', 'jp-ACP-terminalCommand', `$ ${line}`);
  cmd.title =
    (state?.cwd ? `${line}\nin ${state.cwd}` : line) +
    (agents ? '\nrun by the agent itself, not in a Jupyter terminal (its output as the agent reported it)' : '');
  head.appendChild(cmd);
  const status = state?.exitStatus;
  const failed = !!status && (!!status.signal || (status.exitCode ?? 0) !== 0);
  const badge = el(
    'span',
    `jp-ACP-terminalStatus jp-mod-${running ? 'running' : failed ? 'failed' : 'done'}`,
    exitLabel(state)
  );
  head.appendChild(badge);
  if (state?.name && ctx.canOpenTerminal()) {
    const open = button(
      'Open terminal',
      'jp-ACP-terminalOpen',
      () => void openIfRunning(ctx, state.name),
      terminalIcon,
      // the visible words lead the accessible name (WCAG 2.5.3, "label in name")
      running
        ? `Open terminal: Open Jupyter terminal ${state.name}, where this command runs`
        : 'Open terminal (unavailable: the command has ended, its terminal is gone; the output stays here)'
    );
    open.disabled = !running;
    head.appendChild(open);
  }
  box.appendChild(head);
  const output = state?.output ?? '';
  if (output || running) {
    const pre = el('pre', 'jp-ACP-terminalOutput', output);
    pre.setAttribute('aria-label', `output of ${line}`);
    pre.tabIndex = 0; // it scrolls: a keyboard user reaches it to scroll (axe scrollable-region-focusable)
    if (state?.truncated) {
      pre.title = 'The earliest output is not shown';
    }
    box.appendChild(pre);
    // follow the output as it grows (once laid out)
    requestAnimationFrame(() => {
      pre.scrollTop = pre.scrollHeight;
    });
  }
  return box;
}
