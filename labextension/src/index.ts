import {
  ILabShell,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Widget } from '@lumino/widgets';

/**
 * The agent sidebar: one chat per notebook, bound to the notebook in focus.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-acp-host:plugin',
  description: 'A sidebar chat with ACP agents, bound to the active notebook.',
  autoStart: true,
  optional: [ILabShell],
  activate: (app: JupyterFrontEnd) => {
    const panel = new Widget();
    panel.id = 'jupyter-acp-sidebar';
    panel.addClass('jp-ACP-panel');
    panel.title.caption = 'Agent';
    panel.title.label = 'Agent';
    const empty = document.createElement('div');
    empty.className = 'jp-ACP-empty';
    empty.textContent = 'Open a notebook to talk to its agent.';
    panel.node.appendChild(empty);
    app.shell.add(panel, 'right', { rank: 600 });
  }
};

export default plugin;
