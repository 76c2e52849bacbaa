import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';

import { ActivityMonitor } from './activity';
import { attachPlugin } from './attach';
import { AcpApi } from './api';
import { FrontendBridge } from './bridge';
import { AcpHost } from './host';
import { setTranslator, trans } from './i18n';
import { AgentPanel } from './panel';
import { REMOVE_MARKS_COMMAND, REVIEW_COMMAND, ReviewController } from './review';
import { IAcpHost } from './tokens';
import { ALLOW_COMMAND, REJECT_COMMAND } from './usage';

export * from './tokens';

const PLUGIN_ID = 'jupyter-acp-host:plugin';

/** The sidebar's id: its DOM id, and its name in the saved layout (a reload shows it again if it was open). */
const PANEL_ID = 'jupyter-acp-sidebar';

export const agentIcon = new LabIcon({
  name: 'jupyter-acp-host:agent',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16" height="16">' +
    '<path class="jp-icon3" fill="#616161" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2zm4.5 5.5a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm7 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3z"/>' +
    '</svg>'
});

/**
 * The agent sidebar: one chat per notebook, bound to the notebook in focus. It provides `IAcpHost` (tokens.ts), so
 * other extensions open the sidebar, prompt a notebook's agent and follow its sessions the way the sidebar does.
 */
const plugin: JupyterFrontEndPlugin<IAcpHost> = {
  id: PLUGIN_ID,
  description: 'A sidebar chat with ACP agents, bound to the active notebook.',
  autoStart: true,
  provides: IAcpHost,
  requires: [INotebookTracker, IRenderMimeRegistry],
  optional: [ISettingRegistry, ICommandPalette, IEditorLanguageRegistry, ILayoutRestorer, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    rendermime: IRenderMimeRegistry,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null,
    languages: IEditorLanguageRegistry | null,
    restorer: ILayoutRestorer | null,
    translator: ITranslator | null
  ): IAcpHost => {
    // first: every module's strings (the panel's included) are looked up through it from now on
    setTranslator(translator ?? nullTranslator);
    const api = new AcpApi();
    // review and rewind (review/): the footer's "Review N changes", "Review after", the cells' agent marks
    const review = new ReviewController({ app, requester: api, tracker, languages });
    // who the viewer is: a shared session's log names the others and says "You" for them
    const user = app.serviceManager.user;
    const panel = new AgentPanel({
      tracker,
      rendermime,
      commands: app.commands,
      api,
      review,
      me: () => user.identity?.username ?? null
    });
    void user.ready.then(() => panel.identityKnown()).catch(() => undefined);
    panel.id = PANEL_ID;
    panel.title.icon = agentIcon;
    panel.title.caption = trans.__('Agent: a chat bound to the notebook in focus');
    app.shell.add(panel, 'right', { rank: 600 });
    // in the saved layout: a reload with the sidebar open opens it again (restored after the shell's widgets are in)
    restorer?.add(panel, PANEL_ID);

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
    const reveal = async (notebook?: string) => {
      if (notebook) {
        await app.commands.execute('docmanager:open', { path: notebook });
      }
      app.shell.activateById(panel.id);
    };
    const host = new AcpHost({ api, shownSession: () => panel.currentSession, reveal });
    panel.onActivity = () => {
      activity.refresh();
      host.panelChanged(); // the shown session changes with what the panel renders
    };
    activity.onPoll = list => review.sessionsPolled(list, panel.isVisible ? (panel.currentSession?.id ?? null) : null);
    panel.disposed.connect(() => activity.dispose());

    addCommands(app, panel, palette);
    addReviewCommands(app, review, tracker, palette);
    return host;
  }
};

/** Review a turn, remove the agent marks of a notebook (palette entries; the marks' command also in the notebook's menu). */
function addReviewCommands(
  app: JupyterFrontEnd,
  review: ReviewController,
  tracker: INotebookTracker,
  palette: ICommandPalette | null
): void {
  const category = trans.__('Agent (ACP)');
  app.commands.addCommand(REVIEW_COMMAND, {
    label: trans.__("Review the Agent's Last Turn"),
    caption: trans.__(
      "Open the review of the agent's latest turn with changes in the notebook in focus: its notebook diff, keep or " +
        'discard each change, rewind to before the turn (kernel included) and undo the rewind'
    ),
    execute: args =>
      review.openFromCommand({
        session: typeof args.session === 'string' ? args.session : undefined,
        turn: typeof args.turn === 'string' ? args.turn : undefined,
        notebook: typeof args.notebook === 'string' ? args.notebook : undefined,
        cell: typeof args.cell === 'string' ? args.cell : undefined
      })
  });
  app.commands.addCommand(REMOVE_MARKS_COMMAND, {
    label: trans.__('Remove Agent Marks from This Notebook'),
    caption: trans.__(
      'Delete the record of which agent changed each cell (metadata.jupyter_acp) from every cell of the notebook in ' +
        'focus, before sharing it; your own edit, undone with Undo, kept when you save'
    ),
    isEnabled: () => !!tracker.currentWidget,
    execute: () => review.removeMarks()
  });
  app.contextMenu.addItem({ command: REMOVE_MARKS_COMMAND, selector: '.jp-Notebook', rank: 90 });
  if (palette) {
    palette.addItem({ command: REVIEW_COMMAND, category });
    palette.addItem({ command: REMOVE_MARKS_COMMAND, category });
  }
}

/** Palette commands and their default shortcuts (free in JupyterLab 4; the panel's only inside it). */
function addCommands(app: JupyterFrontEnd, panel: AgentPanel, palette: ICommandPalette | null): void {
  const { commands } = app;
  const category = trans.__('Agent (ACP)');
  const inPanel = () => !!panel.currentSession;
  commands.addCommand('jupyter-acp:open', {
    label: trans.__('Open the Agent Panel and Focus Its Input'),
    caption: trans.__('Show the agent sidebar for the notebook in focus and put the cursor in its message box'),
    execute: () => {
      app.shell.activateById(panel.id);
      panel.focusInput();
    }
  });
  commands.addCommand('jupyter-acp:new-conversation', {
    label: trans.__('New Agent Conversation'),
    caption: trans.__(
      'Start a new conversation for the notebook in focus (the agent forgets this one; the history keeps it)'
    ),
    isEnabled: inPanel,
    execute: () => panel.newConversation()
  });
  commands.addCommand('jupyter-acp:stop', {
    label: trans.__('Stop the Agent'),
    caption: trans.__('Stop the running turn of the conversation shown in the agent panel'),
    isEnabled: inPanel,
    execute: () => {
      panel.stop();
    }
  });
  commands.addCommand(ALLOW_COMMAND, {
    label: trans.__('Allow the Pending Agent Request Once'),
    caption: trans.__("Answer the agent's oldest waiting permission request in the panel with “Allow once”"),
    isEnabled: inPanel,
    execute: () => panel.answerPending('allow')
  });
  commands.addCommand(REJECT_COMMAND, {
    label: trans.__('Reject the Pending Agent Request'),
    caption: trans.__("Answer the agent's oldest waiting permission request in the panel with “Reject”"),
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
