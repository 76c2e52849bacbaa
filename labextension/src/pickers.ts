/**
 * The header's pickers: the agent for this notebook, the session's mode and config options, and the
 * tools "Always allow" let run without asking (revocable).
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { closeIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { AcpApi, ApiError, IAgentInfo } from './api';
import { button, el } from './dom';
import { IPicker, toolLabel } from './model';
import type { SessionView } from './session';

/** The value of a detected agent's "Enable…" entry in the agent picker. */
const ENABLE = 'enable:';

/** A dialog body from a plain node. */
class WidgetBody extends Widget {
  constructor(node: HTMLElement) {
    super({ node });
  }
}

/** What the pickers need from the panel. */
export interface IPickersHost {
  readonly api: AcpApi;
  /** The conversation on screen. */
  readonly view: SessionView | null;
  flash(text: string, level?: string): void;
  renderChrome(): void;
}

export class Pickers {
  readonly agentSelect = el('select', 'jp-ACP-agentSelect');
  /** Where the last enabled agent was written (shown under the picker until another choice). */
  readonly enabled = el('div', 'jp-ACP-enabledNote');
  readonly options = el('div', 'jp-ACP-options');
  readonly optionsError = el('div', 'jp-ACP-optionsError');
  /** "Always allowed: Edit cell ×, Run cells ×": the session's standing approvals, revocable. */
  readonly policy = el('div', 'jp-ACP-policy');
  private _agents: IAgentInfo[] = [];
  private _optionsSig = '';
  private _policySig = '';
  /** Switches waiting for the server, by `session:picker`. */
  private _pending = new Set<string>();
  /** The last refused switch, shown under the pickers until dismissed or a switch succeeds. */
  private _optionError: { session: string; text: string } | null = null;

  constructor(private readonly _host: IPickersHost) {
    this.agentSelect.setAttribute('aria-label', 'Agent for this notebook');
    this.enabled.hidden = true;
    this.enabled.setAttribute('role', 'status');
    // a detected agent's "Enable…" entry: handled here, before the panel's listener switches agents
    this.agentSelect.addEventListener('change', e => {
      const value = this.agentSelect.value;
      if (value.startsWith(ENABLE)) {
        e.stopImmediatePropagation();
        void this._enable(value.slice(ENABLE.length));
      }
    });
    this.options.setAttribute('role', 'group');
    this.options.setAttribute('aria-label', "The agent's session options");
    this.options.hidden = true;
    this.optionsError.setAttribute('role', 'alert');
    this.optionsError.hidden = true;
    this.policy.setAttribute('role', 'group');
    this.policy.setAttribute('aria-label', 'Tools that run without asking in this notebook');
    this.policy.hidden = true;
  }

  async loadAgents(): Promise<void> {
    try {
      this._agents = await this._host.api.agents();
    } catch {
      this._agents = [];
    }
    this.syncAgentSelect();
  }

  syncAgentSelect(): void {
    const sel = this.agentSelect;
    const current = this._host.view?.info.agent ?? '';
    sel.textContent = '';
    const configured = this._agents.filter(a => a.configured);
    const detected = this._agents.filter(a => !a.configured);
    for (const a of configured) {
      const o = el('option', '', a.title + (a.available ? '' : ' (not installed)'));
      o.value = a.name;
      o.disabled = !a.available;
      sel.appendChild(o);
    }
    if (detected.length) {
      const g = el('optgroup');
      g.label = 'Found on this machine';
      for (const a of detected) {
        const o = el('option', '', `Enable ${a.title}…`);
        o.value = ENABLE + a.name;
        o.title = `${a.command ?? a.name}: add it to your Jupyter configuration and use it now`;
        g.appendChild(o);
      }
      sel.appendChild(g);
    }
    if (current && !configured.some(a => a.name === current)) {
      const o = el('option', '', current);
      o.value = current;
      sel.appendChild(o);
    }
    sel.value = current;
    sel.disabled = !this._host.view;
  }

  /**
   * The agent to open for a notebook: its current agent (server-side, shared with the magic). A notebook still on
   * the server's default takes the user's "default agent" setting, made its current agent (so the magic follows).
   */
  async currentAgent(path: string, preferred: string): Promise<string | undefined> {
    try {
      const cur = await this._host.api.currentAgent(path);
      if (!cur.chosen && preferred && preferred !== cur.agent && cur.agents.includes(preferred)) {
        try {
          return (await this._host.api.setCurrentAgent(path, preferred)).agent;
        } catch {
          return cur.agent; // a read-only user: the notebook stays on the server's agent
        }
      }
      return cur.agent;
    } catch {
      return undefined; // the server opens the notebook's current agent anyway
    }
  }

  /** The picker chose an agent: it becomes the notebook's current agent (false, and said, when refused). */
  async choose(path: string, name: string): Promise<boolean> {
    try {
      await this._host.api.setCurrentAgent(path, name);
      return true;
    } catch (err) {
      const why =
        err instanceof ApiError && err.status === 403 ? " (you may read this notebook's agent, not change it)" : '';
      this._host.flash(`Could not switch to ${name}: ${(err as Error).message}${why}`);
      return false;
    }
  }

  /** Enable an agent found on PATH: the server writes its catalog entry to the user's config (never a command). */
  private async _enable(name: string): Promise<void> {
    const agent = this._agents.find(a => a.name === name && !a.configured);
    this.syncAgentSelect(); // back to the current agent while the user decides
    if (!agent) {
      return;
    }
    const body = el('div', 'jp-ACP-enableBody');
    body.append(
      el('p', '', `${agent.title} was found at ${agent.command}.`),
      el(
        'p',
        '',
        'Enabling adds its entry to your Jupyter configuration (jupyter_server_config.d/jupyter_acp_agents.json, ' +
          'private to you) and makes it usable at once. It runs as you, with your files, like any agent.'
      )
    );
    const answer = await showDialog({
      title: `Enable ${agent.title}?`,
      body: new WidgetBody(body),
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Enable' })]
    });
    if (!answer.button.accept) {
      return;
    }
    try {
      const res = await this._host.api.request<{ name: string; path: string; agents: IAgentInfo[] }>('agents/enable', {
        method: 'POST',
        body: JSON.stringify({ name })
      });
      this._agents = res.agents;
      this.syncAgentSelect();
      this.enabled.textContent = `${agent.title} is enabled: written to ${res.path}`;
      this.enabled.hidden = false;
      this._host.flash(`${agent.title} is enabled (written to ${res.path}); pick it above`, 'info');
    } catch (err) {
      this._host.flash(`Could not enable ${agent.title}: ${(err as Error).message}`);
    }
  }

  /**
   * The agent's mode and config options as compact pickers. Rebuilt only when something they show
   * changes (the chrome re-renders on every streamed chunk; rebuilding would close an open select).
   */
  renderOptions(): void {
    const view = this._host.view;
    // a picker with one choice chooses nothing: hidden (a switch always has two)
    const pickers = (view ? view.model.pickers() : []).filter(p => p.kind === 'boolean' || p.choices.length > 1);
    const running = !!view?.model.runningTurn;
    const sid = view?.info.id ?? '';
    const error = this._optionError && this._optionError.session === sid ? this._optionError.text : '';
    const pending = [...this._pending].filter(k => k.startsWith(sid + ':'));
    const sig = JSON.stringify([sid, pickers, running, pending, error]);
    if (sig === this._optionsSig) {
      return;
    }
    this._optionsSig = sig;
    this.options.textContent = '';
    this.options.hidden = !pickers.length;
    for (const p of pickers) {
      this.options.appendChild(this._picker(view!, p, running));
    }
    const box = this.optionsError;
    box.textContent = '';
    box.hidden = !error;
    if (error) {
      box.append(
        el('span', 'jp-ACP-optionsErrorText', error),
        button(
          '',
          'jp-ACP-iconButton jp-ACP-dismiss',
          () => {
            this._optionError = null;
            this.renderOptions();
          },
          closeIcon,
          'Dismiss'
        )
      );
    }
  }

  /**
   * What "Always allow" let run without asking in this notebook's session, one chip per tool; × asks
   * the server to stop (the policy_changed event then updates every browser).
   */
  renderPolicy(): void {
    const view = this._host.view;
    const tools = view?.model.alwaysAllowed ?? [];
    const sig = JSON.stringify([view?.info.id ?? '', tools]);
    if (sig === this._policySig) {
      return;
    }
    this._policySig = sig;
    const box = this.policy;
    box.textContent = '';
    box.hidden = !view || !tools.length;
    if (!view || !tools.length) {
      return;
    }
    const label = el('span', 'jp-ACP-policyLabel', 'Always allowed:');
    label.title =
      "These tools run without asking in this notebook's session (you chose “Always allow”). × makes them ask again.";
    box.appendChild(label);
    const revoke = (tool: string | undefined, what: string) => {
      box.querySelectorAll('button').forEach(b => ((b as HTMLButtonElement).disabled = true));
      this._host.api
        .revokeAlwaysAllow(view.info.id, tool)
        .then(res => {
          view.model.alwaysAllowed = Array.isArray(res?.always_allowed)
            ? res.always_allowed.map(String)
            : (view.model.alwaysAllowed ?? []).filter(t => tool !== undefined && t !== tool);
        })
        .catch(err => this._host.flash(`Could not stop always allowing ${what}: ${(err as Error).message}`))
        .finally(() => {
          this._policySig = '';
          this._host.renderChrome();
        });
    };
    for (const tool of tools) {
      const name = toolLabel(tool);
      const chip = el('span', 'jp-ACP-policyChip');
      chip.dataset.tool = tool;
      chip.title = `${name} (${tool}) runs without asking in this notebook's session`;
      chip.append(
        el('span', 'jp-ACP-policyName', name),
        button(
          '',
          'jp-ACP-iconButton jp-ACP-policyRevoke',
          () => revoke(tool, name),
          closeIcon,
          `Stop always allowing ${name}`
        )
      );
      box.appendChild(chip);
    }
    if (tools.length > 1) {
      box.appendChild(
        button(
          'Ask for all again',
          'jp-ACP-linkButton jp-ACP-policyRevokeAll',
          () => revoke(undefined, 'these tools'),
          undefined,
          'Stop always allowing every tool'
        )
      );
    }
  }

  private _picker(view: SessionView, p: IPicker, running: boolean): HTMLElement {
    const key = `${view.info.id}:${p.kind === 'mode' ? 'mode' : 'config:' + p.id}`;
    const pending = this._pending.has(key);
    // While a turn runs the mode can still change: agents apply it from their next step (the
    // built-in agent checks it at each tool call, so "Auto" stops the questions of a long turn).
    // Other options (the model above all) wait for the turn's end: one answer from two models
    // would be confusing, and agents read them when a prompt starts.
    const locked = running && p.kind !== 'mode' && p.category !== 'mode';
    const title = (p.description || p.name) + (locked ? ' (can be changed when the agent is done)' : '');
    if (p.kind === 'boolean') {
      // JupyterLab's own switch (ui-components' Switch): its classes give the native look
      const sw = el('button', 'jp-switch jp-ACP-switch');
      sw.type = 'button';
      sw.setAttribute('role', 'switch');
      sw.setAttribute('aria-checked', String(p.value === true));
      sw.setAttribute('aria-label', p.name);
      sw.dataset.option = p.id;
      sw.title = title;
      sw.disabled = locked || pending;
      sw.setAttribute('aria-busy', String(pending));
      const track = el('div', 'jp-switch-track');
      track.setAttribute('aria-hidden', 'true');
      sw.append(el('span', 'jp-switch-label', p.name), track);
      sw.addEventListener('click', () => void this._switch(view, p, key, !(p.value === true), p.value ? 'off' : 'on'));
      return sw;
    }
    const wrap = el('label', 'jp-ACP-option');
    wrap.dataset.option = p.kind === 'mode' ? 'mode' : p.id;
    wrap.title = title;
    const sel = el('select', 'jp-ACP-optionSelect');
    sel.setAttribute('aria-label', p.kind === 'mode' ? 'Agent mode' : p.name);
    if (p.description) {
      sel.setAttribute('aria-description', p.description);
    }
    let group: HTMLOptGroupElement | null = null;
    for (const c of p.choices) {
      const o = el('option', '', c.name);
      o.value = c.value;
      if (c.description) {
        o.title = c.description;
      }
      if (c.group) {
        if (!group || group.label !== c.group) {
          group = el('optgroup');
          group.label = c.group;
          sel.appendChild(group);
        }
        group.appendChild(o);
      } else {
        group = null;
        sel.appendChild(o);
      }
    }
    sel.value = String(p.value);
    sel.disabled = locked || pending || p.choices.length < 2;
    sel.setAttribute('aria-busy', String(pending));
    sel.addEventListener('change', () => {
      const choice = p.choices.find(c => c.value === sel.value);
      void this._switch(view, p, key, sel.value, choice?.name ?? sel.value);
    });
    wrap.append(el('span', 'jp-ACP-optionLabel', p.kind === 'mode' ? 'Mode' : p.name), sel);
    return wrap;
  }

  /** Ask the server to switch; the answer (and the session_config event every watcher gets) updates the pickers. */
  private async _switch(
    view: SessionView,
    p: IPicker,
    key: string,
    value: string | boolean,
    label: string
  ): Promise<void> {
    this._pending.add(key);
    if (this._optionError?.session === view.info.id) {
      this._optionError = null;
    }
    this.renderOptions();
    try {
      const info =
        p.kind === 'mode'
          ? await this._host.api.setMode(view.info.id, String(value))
          : await this._host.api.setConfig(view.info.id, p.id, value);
      view.model.setConfig(info.modes, info.config_options);
      view.info = { ...view.info, ...info };
    } catch (err) {
      const what = p.kind === 'mode' ? 'mode' : p.name;
      const status = err instanceof ApiError ? err.status : 0;
      const reason = (err as Error).message.replace(/^the agent refused the (mode|option):\s*/i, '');
      const kept =
        typeof p.value === 'boolean'
          ? p.value
            ? 'on'
            : 'off'
          : (p.choices.find(c => c.value === p.value)?.name ?? p.value);
      this._optionError = {
        session: view.info.id,
        text:
          status === 502
            ? `The agent refused ${what} “${label}”: ${reason}. It stays “${kept}”.`
            : `Could not set ${what} to “${label}”: ${reason}. It stays “${kept}”.`
      };
    } finally {
      this._pending.delete(key);
      this._optionsSig = ''; // a refused switch puts the control back on the agent's value
      this._host.renderChrome();
    }
  }
}
