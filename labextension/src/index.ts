import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { LabIcon } from '@jupyterlab/ui-components';

import { FrontendBridge } from './bridge';
import { AgentPanel } from './panel';

const PLUGIN_ID = 'jupyter-acp-host:plugin';

export const agentIcon = new LabIcon({
  name: 'jupyter-acp-host:agent',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16" height="16">' +
    '<path class="jp-icon3" fill="#616161" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2zm4.5 5.5a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm7 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3z"/>' +
    '</svg>'
});

/**
 * The agent sidebar: one chat per notebook, bound to the notebook in focus.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'A sidebar chat with ACP agents, bound to the active notebook.',
  autoStart: true,
  requires: [INotebookTracker, IRenderMimeRegistry],
  optional: [ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    rendermime: IRenderMimeRegistry,
    settingRegistry: ISettingRegistry | null
  ) => {
    const panel = new AgentPanel({ tracker, rendermime, commands: app.commands });
    panel.id = 'jupyter-acp-sidebar';
    panel.title.icon = agentIcon;
    panel.title.caption = 'Agent: a chat bound to the notebook in focus';
    app.shell.add(panel, 'right', { rank: 600 });

    // the server asks this tab for the selection and, with RTC off, applies agent edits here
    new FrontendBridge(tracker);

    if (settingRegistry) {
      void settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = () =>
            panel.configure({
              defaultAgent: String(settings.get('defaultAgent').composite ?? ''),
              includeSelection: settings.get('includeSelection').composite !== false
            });
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => console.warn('jupyter-acp-host: settings not loaded', reason));
    }

    app.commands.addCommand('jupyter-acp:open', {
      label: 'Open the Agent Panel',
      execute: () => app.shell.activateById(panel.id)
    });
  }
};

export default plugin;
