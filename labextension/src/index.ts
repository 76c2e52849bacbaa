import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { LabIcon } from '@jupyterlab/ui-components';

import { ActivityMonitor } from './activity';
import { attachPlugin } from './attach';
import { FrontendBridge } from './bridge';
import { AgentPanel } from './panel';
import { ALLOW_COMMAND, REJECT_COMMAND } from './usage';

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
  optional: [ISettingRegistry, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    rendermime: IRenderMimeRegistry,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null
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

    // badges for pending requests and running turns of every notebook, and a notification for a
    // request the panel does not show (see activity.ts for why it polls the session list)
    const activity = new ActivityMonitor(
      {
        api: panel.api,
        title: panel.title,
        shownSession: () => (panel.isVisible ? (panel.currentSession?.id ?? null) : null),
        reveal: async (notebook: string) => {
          await app.commands.execute('docmanager:open', { path: notebook });
          app.shell.activateById(panel.id);
          panel.focusInput();
        }
      },
      tracker
    );
    panel.onActivity = () => activity.refresh();
    panel.disposed.connect(() => activity.dispose());

    addCommands(app, panel, palette);
  }
};

/** Palette commands and their default shortcuts (free in JupyterLab 4; the panel's only inside it). */
function addCommands(app: JupyterFrontEnd, panel: AgentPanel, palette: ICommandPalette | null): void {
  const { commands } = app;
  const category = 'Agent (ACP)';
  const inPanel = () => !!panel.currentSession;
  commands.addCommand('jupyter-acp:open', {
    label: 'Open the Agent Panel and Focus Its Input',
    caption: 'Show the agent sidebar for the notebook in focus and put the cursor in its message box',
    execute: () => {
      app.shell.activateById(panel.id);
      panel.focusInput();
    }
  });
  commands.addCommand('jupyter-acp:new-conversation', {
    label: 'New Agent Conversation',
    caption: 'Start a new conversation for the notebook in focus (the agent forgets this one; the history keeps it)',
    isEnabled: inPanel,
    execute: () => panel.newConversation()
  });
  commands.addCommand('jupyter-acp:stop', {
    label: 'Stop the Agent',
    caption: 'Stop the running turn of the conversation shown in the agent panel',
    isEnabled: inPanel,
    execute: () => {
      panel.stop();
    }
  });
  commands.addCommand(ALLOW_COMMAND, {
    label: 'Allow the Pending Agent Request Once',
    caption: "Answer the agent's oldest waiting permission request in the panel with “Allow once”",
    isEnabled: inPanel,
    execute: () => panel.answerPending('allow')
  });
  commands.addCommand(REJECT_COMMAND, {
    label: 'Reject the Pending Agent Request',
    caption: "Answer the agent's oldest waiting permission request in the panel with “Reject”",
    isEnabled: inPanel,
    execute: () => panel.answerPending('reject')
  });
  const bindings: [string, string, string][] = [
    ['jupyter-acp:open', 'Accel Shift A', 'body'],
    ['jupyter-acp:new-conversation', 'Alt Shift N', '.jp-ACP-panel'],
    ['jupyter-acp:stop', 'Alt Shift S', '.jp-ACP-panel'],
    [ALLOW_COMMAND, 'Alt Shift A', '.jp-ACP-panel'],
    [REJECT_COMMAND, 'Alt Shift R', '.jp-ACP-panel']
  ];
  for (const [command, keys, selector] of bindings) {
    commands.addKeyBinding({ command, keys: [keys], selector });
  }
  if (palette) {
    for (const [command] of bindings) {
      palette.addItem({ command, category });
    }
  }
}

export default [plugin, attachPlugin];
