/**
 * The header's pickers: the agent for this notebook, the session's mode and config options, and the
 * tools "Always allow" let run without asking (revocable). What the server's admin does not let users pick (an
 * agent they may not enable, a mode that acts without asking) stays listed, greyed, with the admin's reason.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { closeIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { AcpApi, ApiError, IAgentInfo } from './api';
import { button, el } from './dom';
import { trans } from './i18n';
import { IPicker, toolLabel } from './model';
import type { SessionView } from './session';

/** The value of a detected agent's "Enable…" entry in the agent picker. */
const ENABLE = 'enable:';
/** The value of an ACP registry agent's "Install…" entry in the agent picker. */
const INSTALL = 'install:';
/** How often an install's progress is asked (ms). */
const INSTALL_POLL = 1000;

/** One agent of the ACP Agent Registry, as `GET jupyter-acp/registry` answers it. */
export interface IRegistryAgent {
  id: string;
  name: string;
  version: string;
  description: string;
  /** How this server would install it: npx, uvx or binary (null: it cannot, `reason` says why). */
  distribution: string | null;
  distributions: string[];
  install_line: string | null;
  runs: string | null;
  installable: boolean;
  reason: string | null;
  installed: boolean;
  enabled: boolean;
  dropped_env: string[];
  source: string;
  install: {
    state: 'installing' | 'installed' | 'enabled' | 'failed';
    step: string;
    error: string | null;
    lines: string[];
  } | null;
}

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
  private _registry: IRegistryAgent[] = [];
  private _optionsSig = '';
  private _policySig = '';
  /** Switches waiting for the server, by `session:picker`. */
  private _pending = new Set<string>();
  /** The last refused switch, shown under the pickers until dismissed or a switch succeeds. */
  private _optionError: { session: string; text: string } | null = null;

  constructor(private readonly _host: IPickersHost) {
    this.agentSelect.setAttribute('aria-label', trans.__('Agent for this notebook'));
    this.enabled.hidden = true;
    this.enabled.setAttribute('role', 'status');
    // a detected agent's "Enable…" entry: handled here, before the panel's listener switches agents
    this.agentSelect.addEventListener('change', e => {
      const value = this.agentSelect.value;
      if (value.startsWith(ENABLE)) {
        e.stopImmediatePropagation();
        void this._enable(value.slice(ENABLE.length));
      } else if (value.startsWith(INSTALL)) {
        e.stopImmediatePropagation();
        void this._install(value.slice(INSTALL.length));
      }
    });
    this.options.setAttribute('role', 'group');
    this.options.setAttribute('aria-label', trans.__("The agent's session options"));
    this.options.hidden = true;
    this.optionsError.setAttribute('role', 'alert');
    this.optionsError.hidden = true;
    this.policy.setAttribute('role', 'group');
    this.policy.setAttribute('aria-label', trans.__('Tools that run without asking in this notebook'));
    this.policy.hidden = true;
  }

  async loadAgents(): Promise<void> {
    try {
      this._agents = await this._host.api.agents();
    } catch {
      this._agents = [];
    }
    this.syncAgentSelect();
    void this.loadRegistry();
  }

  /** The ACP registry's agents (after the configured ones: the registry may be slow or offline). */
  async loadRegistry(): Promise<void> {
    try {
      this._registry = await this._host.api.request<IRegistryAgent[]>('registry');
    } catch {
      this._registry = [];
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
      const o = el('option', '', a.available ? a.title : trans.__('%1 (not installed)', a.title));
      o.value = a.name;
      o.disabled = !a.available;
      sel.appendChild(o);
    }
    if (detected.length) {
      const g = el('optgroup');
      g.label = trans.__('Found on this machine');
      for (const a of detected) {
        const o = el(
          'option',
          '',
          a.fixed_by_admin
            ? trans.__('Enable %1… (not allowed by your admin)', a.title)
            : trans.__('Enable %1…', a.title)
        );
        o.value = ENABLE + a.name;
        o.title = a.fixed_by_admin
          ? trans.__('Set by your admin: %1', a.fixed_by_admin)
          : trans.__('%1: keep it with your agents on the server and use it now', a.command ?? a.name);
        o.disabled = !!a.fixed_by_admin;
        if (a.fixed_by_admin) {
          o.dataset.fixedByAdmin = a.fixed_by_admin;
        }
        g.appendChild(o);
      }
      sel.appendChild(g);
    }
    const names = new Set(this._agents.map(a => a.name));
    const installable = this._registry.filter(r => !r.enabled && !names.has(r.id));
    if (installable.length) {
      const g = el('optgroup');
      g.label = trans.__('From the ACP registry');
      for (const r of installable) {
        const how = r.distribution ?? r.distributions.join(', ');
        const busy = r.install?.state === 'installing';
        const o = el(
          'option',
          '',
          busy
            ? trans.__('Installing %1 %2 (%3)…', r.name, r.version, how)
            : trans.__('Install %1 %2 (%3)…', r.name, r.version, how)
        );
        o.value = INSTALL + r.id;
        o.dataset.registry = r.id;
        o.title = r.installable
          ? trans.__('%1\nRuns: %2', r.description, r.runs)
          : trans.__('%1\nCannot be installed here: %2', r.description, r.reason);
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
    sel.disabled = !this._host.view || !!this._host.view.readOnly; // a reader cannot switch the notebook's agent
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
        err instanceof ApiError && err.status === 403
          ? trans.__(" (you may read this notebook's agent, not change it)")
          : '';
      this._host.flash(trans.__('Could not switch to %1: %2%3', name, (err as Error).message, why));
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
      el('p', '', trans.__('%1 was found at %2.', agent.title, agent.command)),
      el(
        'p',
        '',
        trans.__(
          'Enabling keeps it with your agents on the server (private to you, next to what the admin presets, so ' +
            'both stay after a restart) and makes it usable at once. It runs as you, with your files, like any agent.'
        )
      )
    );
    const answer = await showDialog({
      title: trans.__('Enable %1?', agent.title),
      body: new WidgetBody(body),
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: trans.__('Enable') })]
    });
    if (!answer.button.accept) {
      return;
    }
    try {
      const res = await this._host.api.request<{ name: string; agents: IAgentInfo[] }>('agents/enable', {
        method: 'POST',
        body: JSON.stringify({ name })
      });
      this._agents = res.agents;
      this.syncAgentSelect();
      this.enabled.textContent = trans.__('%1 is enabled: kept on the server with your agents', agent.title);
      this.enabled.hidden = false;
      this._host.flash(
        trans.__('%1 is enabled (kept on the server with your agents); pick it above', agent.title),
        'info'
      );
    } catch (err) {
      this._host.flash(trans.__('Could not enable %1: %2', agent.title, (err as Error).message));
    }
  }

  /**
   * Install an agent of the ACP registry: the dialog says what will be downloaded and what will run, the server
   * installs it into the user's own folder (`POST registry/install`, needs execute), the note under the picker shows
   * its progress, and once it is enabled it is listed with the configured agents, usable at once.
   */
  private async _install(id: string): Promise<void> {
    const agent = this._registry.find(r => r.id === id);
    this.syncAgentSelect(); // back to the current agent while the user decides
    if (!agent) {
      return;
    }
    if (agent.install?.state === 'installing') {
      void this._followInstall(agent);
      return;
    }
    const body = el('div', 'jp-ACP-enableBody jp-ACP-installBody');
    body.append(el('p', '', agent.description));
    if (!agent.installable) {
      body.append(el('p', 'jp-ACP-installRefused', trans.__('It cannot be installed here: %1', agent.reason)));
      await showDialog({
        title: `${agent.name} ${agent.version}`,
        body: new WidgetBody(body),
        buttons: [Dialog.okButton()]
      });
      return;
    }
    const code = (label: string, text: string) => {
      const row = el('div', 'jp-ACP-installRow');
      row.append(el('span', 'jp-ACP-installLabel', label), el('code', 'jp-ACP-installCode', text));
      return row;
    };
    body.append(
      el('p', '', trans.__('From the ACP registry (%1), into your own Jupyter data folder:', agent.distribution)),
      code(trans.__('Installs with'), agent.install_line ?? ''),
      code(trans.__('Then runs'), agent.runs ?? ''),
      el(
        'p',
        '',
        trans.__('It runs as you, with your files, like any agent. Enabling adds it to your Jupyter configuration.')
      )
    );
    if (agent.dropped_env.length) {
      body.append(
        el(
          'p',
          '',
          trans.__('Not set from the registry (they change how programs load): %1', agent.dropped_env.join(', '))
        )
      );
    }
    const answer = await showDialog({
      title: trans.__('Install %1 %2?', agent.name, agent.version),
      body: new WidgetBody(body),
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: trans.__('Install') })]
    });
    if (!answer.button.accept) {
      return;
    }
    try {
      const started = await this._host.api.request<IRegistryAgent>('registry/install', {
        method: 'POST',
        body: JSON.stringify({ id })
      });
      void this._followInstall(started);
    } catch (err) {
      this._host.flash(trans.__('Could not install %1: %2', agent.name, (err as Error).message));
    }
  }

  /** Show an install's progress under the picker until it is enabled (the agents are listed again) or failed. */
  private async _followInstall(agent: IRegistryAgent): Promise<void> {
    const note = this.enabled;
    note.hidden = false;
    let current = agent;
    for (;;) {
      const job = current.install;
      const last = job?.lines.length ? job.lines[job.lines.length - 1] : '';
      note.dataset.install = job?.state ?? '';
      if (!job || job.state === 'failed') {
        note.textContent = trans.__('Installing %1 failed: %2', agent.name, job?.error ?? trans.__('no answer'));
        this._host.flash(note.textContent);
        break;
      }
      if (job.state === 'enabled') {
        note.textContent = trans.__('%1 %2 is installed and enabled; pick it above', agent.name, agent.version);
        this._host.flash(note.textContent, 'info');
        await this.loadAgents();
        break;
      }
      note.textContent = last
        ? trans.__('Installing %1 %2: %3 — %4', agent.name, agent.version, job.step, last)
        : trans.__('Installing %1 %2: %3', agent.name, agent.version, job.step);
      await new Promise(resolve => setTimeout(resolve, INSTALL_POLL));
      try {
        current = await this._host.api.request<IRegistryAgent>(`registry/${encodeURIComponent(agent.id)}`);
      } catch (err) {
        note.textContent = trans.__('Could not follow the install of %1: %2', agent.name, (err as Error).message);
        break;
      }
    }
    this.syncAgentSelect();
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
          trans.__('Dismiss')
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
    const label = el('span', 'jp-ACP-policyLabel', trans.__('Always allowed:'));
    label.title = trans.__(
      "These tools run without asking in this notebook's session (you chose “Always allow”). × makes them ask again."
    );
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
        .catch(err => this._host.flash(trans.__('Could not stop always allowing %1: %2', what, (err as Error).message)))
        .finally(() => {
          this._policySig = '';
          this._host.renderChrome();
        });
    };
    for (const tool of tools) {
      const name = toolLabel(tool);
      const chip = el('span', 'jp-ACP-policyChip');
      chip.dataset.tool = tool;
      chip.title = trans.__("%1 (%2) runs without asking in this notebook's session", name, tool);
      chip.append(
        el('span', 'jp-ACP-policyName', name),
        button(
          '',
          'jp-ACP-iconButton jp-ACP-policyRevoke',
          () => revoke(tool, name),
          closeIcon,
          trans.__('Stop always allowing %1', name)
        )
      );
      box.appendChild(chip);
    }
    if (tools.length > 1) {
      box.appendChild(
        button(
          trans.__('Ask for all again'),
          'jp-ACP-linkButton jp-ACP-policyRevokeAll',
          () => revoke(undefined, trans.__('these tools')),
          undefined,
          trans.__('Stop always allowing every tool')
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
    const title = locked
      ? trans.__('%1 (can be changed when the agent is done)', p.description || p.name)
      : p.description || p.name;
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
      sw.addEventListener(
        'click',
        () => void this._switch(view, p, key, !(p.value === true), p.value ? trans.__('off') : trans.__('on'))
      );
      return sw;
    }
    const wrap = el('label', 'jp-ACP-option');
    wrap.dataset.option = p.kind === 'mode' ? 'mode' : p.id;
    wrap.title = title;
    const sel = el('select', 'jp-ACP-optionSelect');
    sel.setAttribute('aria-label', p.kind === 'mode' ? trans.__('Agent mode') : p.name);
    if (p.description) {
      sel.setAttribute('aria-description', p.description);
    }
    let group: HTMLOptGroupElement | null = null;
    // a mode the admin does not let users pick (it acts without asking): listed, greyed, with the reason
    const isMode = p.kind === 'mode' || p.category === 'mode';
    const forbidden = isMode ? (view.info.fixed_by_admin?.modes ?? {}) : {};
    for (const c of p.choices) {
      const why = c.value !== p.value ? forbidden[c.value] : undefined;
      const o = el('option', '', why ? trans.__('%1 (not allowed by your admin)', c.name) : c.name);
      o.value = c.value;
      if (c.description) {
        o.title = c.description;
      }
      if (why) {
        o.disabled = true;
        o.title = trans.__('Set by your admin: %1', why);
        o.dataset.fixedByAdmin = why;
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
    wrap.append(el('span', 'jp-ACP-optionLabel', p.kind === 'mode' ? trans.__('Mode') : p.name), sel);
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
      const what = p.kind === 'mode' ? trans.__('mode') : p.name;
      const status = err instanceof ApiError ? err.status : 0;
      const reason = (err as Error).message.replace(/^the agent refused the (mode|option):\s*/i, '');
      const kept =
        typeof p.value === 'boolean'
          ? p.value
            ? trans.__('on')
            : trans.__('off')
          : (p.choices.find(c => c.value === p.value)?.name ?? p.value);
      this._optionError = {
        session: view.info.id,
        text:
          status === 502
            ? trans.__('The agent refused %1 “%2”: %3. It stays “%4”.', what, label, reason, kept)
            : trans.__('Could not set %1 to “%2”: %3. It stays “%4”.', what, label, reason, kept)
      };
    } finally {
      this._pending.delete(key);
      this._optionsSig = ''; // a refused switch puts the control back on the agent's value
      this._host.renderChrome();
    }
  }
}
