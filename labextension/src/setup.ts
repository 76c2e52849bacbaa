/**
 * Setting an agent up from the panel: the built-in agent's model and key, an agent's login.
 *
 * One card under the status line. The built-in agent without a model gets a small form (a litellm model with
 * suggestions, the provider's key variable and the key, an optional API base); an agent that answered "log in"
 * gets one row per login method it offers: `agent` → a button that asks the agent to log in (`authenticate`),
 * `env_var` → a password field kept on the server for that agent only, `terminal` → a JupyterLab terminal
 * running the agent's login command (the server starts it from its argument list with the agent's environment,
 * `POST agents/NAME/login-terminal`; the card opens that terminal by name and never types into a shell; a login
 * hiding control characters is shown refused, with the server's reason). Values go to the server (kept 0600 for
 * that agent) and never come back: the card shows "set" or "from environment" only. What the server's admin fixed
 * (`fixed_by_admin`: the model and endpoint, provider keys, logging in to that agent) is shown greyed with the
 * admin's reason, since the server refuses it anyway. The card is rebuilt only when what it shows changes, so a
 * field being typed in is never wiped by the chrome's re-renders. An agent that offers ACP `logout` (known once it
 * started) gets a one-line "Log out" instead, asked twice, whose next prompt then brings the login card back. (Over 400 lines on purpose: the model form and
 * the login rows are one card with one life — shown, saved, the agent restarted, the prompt retried.)
 */
import type { CommandRegistry } from '@lumino/commands';

import type { AcpApi } from './api';
import { button, el } from './dom';
import { trans } from './i18n';
import type { SessionView } from './session';

/* eslint-disable @typescript-eslint/no-explicit-any */

export interface IAuthMethod {
  id: string;
  name: string;
  description: string;
  kind: 'agent' | 'env_var' | 'terminal' | string;
  vars?: string[];
  /** What a `terminal` login runs, quoted, its control characters escaped (shown, never typed). */
  command?: string;
  /** Why the server will not start this `terminal` login (the rule and the character it hides). */
  refused?: string;
}

/** `GET agents/NAME/settings`. */
export interface IAgentSettings {
  name: string;
  builtin: boolean;
  needs_model: boolean;
  model: string | null;
  /** Where each variable comes from: set | from environment | from configuration | unset (never a value). */
  settings: Record<string, string>;
  auth_methods: IAuthMethod[];
  state: string;
  notice?: string;
  /** What the server's admin fixed (model, api_base, key, login), with the reason: shown greyed. */
  fixed_by_admin?: Record<string, string>;
  /** The agent offers ACP `logout` (`agentCapabilities.auth.logout`). */
  logout?: boolean;
}

export interface IModelList {
  suggestions: string[];
  key_vars: string[];
  provider_keys: Record<string, string[]>;
  present: string[];
}

/** What the card needs from the panel. */
export interface ISetupHost {
  readonly api: AcpApi;
  readonly view: SessionView | null;
  /** JupyterLab's commands (a terminal for a terminal login). */
  readonly commands?: CommandRegistry;
  flash(text: string, level?: string): void;
  renderChrome(): void;
  /** Send these words as a prompt (Retry after a login). */
  resend(text: string): void;
  /** The agent list changed (a model set: the picker's states). */
  agentsChanged(): void;
}

export function agentSettings(api: AcpApi, name: string): Promise<IAgentSettings> {
  return api.request(`agents/${encodeURIComponent(name)}/settings`);
}

export function saveAgentSettings(api: AcpApi, name: string, body: any): Promise<IAgentSettings> {
  return api.request(`agents/${encodeURIComponent(name)}/settings`, { method: 'POST', body: JSON.stringify(body) });
}

export function agentModels(api: AcpApi, name: string): Promise<IModelList> {
  return api.request(`agents/${encodeURIComponent(name)}/models`);
}

/** Start an agent's `terminal` login on the server; the answer names the Jupyter terminal to open. */
export function startLoginTerminal(
  api: AcpApi,
  name: string,
  methodId: string
): Promise<{ name: string; reused: boolean }> {
  return api.request(`agents/${encodeURIComponent(name)}/login-terminal`, {
    method: 'POST',
    body: JSON.stringify({ methodId })
  });
}

export function authenticate(api: AcpApi, name: string, methodId: string): Promise<IAgentSettings> {
  return api.request(`agents/${encodeURIComponent(name)}/authenticate`, {
    method: 'POST',
    body: JSON.stringify({ methodId })
  });
}

/** The agent forgets the account it works for (ACP `logout`; needs `execute`). */
export function logout(api: AcpApi, name: string): Promise<IAgentSettings> {
  return api.request(`agents/${encodeURIComponent(name)}/logout`, { method: 'POST', body: '{}' });
}

let lists = 0;

/** Asks the card to show the model form for an agent (an error card's "Change the model or key"). */
export const setupRequests = new EventTarget();

export function requestModelForm(agent: string): void {
  setupRequests.dispatchEvent(new CustomEvent('model', { detail: agent }));
}

export class SetupCard {
  readonly node = el('section', 'jp-ACP-setup');
  private _settings: IAgentSettings | null = null;
  /** What was fetched: agent and the login problem it was fetched for. */
  private _fetched = '';
  private _sig = '';
  private _busy = false;
  private _error = '';
  private _models: IModelList | null = null;
  /** The login problem the user acted on (the card hides until another one). */
  private _handled: unknown = null;

  /** The agent whose model form the user opened (a model is set, but the provider refused it). */
  private _forced: string | null = null;
  /**
   * What the user typed in the model form, by field: the card is rebuilt when what it shows changes (Saving…, the
   * suggestions arriving), and a rebuilt form shows what was typed, not blank fields, until a Save succeeds.
   */
  private _typed: Record<string, string> = {};
  /** A prompt sent while the model form was open: it waits in the card and goes once Save succeeds. */
  private _held: { view: SessionView; text: string } | null = null;

  constructor(private readonly _host: ISetupHost) {
    this.node.hidden = true;
    this.node.setAttribute('aria-label', trans.__('Set up the agent'));
    setupRequests.addEventListener('model', e => {
      const agent = String((e as CustomEvent).detail ?? '');
      if (this._host.view?.info.agent !== agent) {
        return;
      }
      if (this._settings && this._settings.name === agent && !this._settings.builtin) {
        this._host.flash(
          trans.__('The model and key of %1 are its own settings (its configuration or its login)', agent)
        );
        return;
      }
      this._forced = agent;
      this._sig = '';
      this._host.renderChrome();
      this.node.scrollIntoView?.({ block: 'nearest' });
    });
  }

  /**
   * Keep a prompt sent while the built-in agent has no model (its form is open): the agent could only answer that it
   * has none. True when kept: the card shows it, and Save sends it.
   */
  hold(view: SessionView, text: string): boolean {
    const s = this._settings;
    if (this.node.hidden || this.node.dataset.card !== 'model' || !s?.needs_model || s.name !== view.info.agent) {
      return false;
    }
    this._held = { view, text };
    this._sig = '';
    this._host.renderChrome();
    return true;
  }

  /** Called with every chrome render: cheap unless something the card shows changed. */
  render(): void {
    const view = this._host.view;
    if (!view) {
      this.node.hidden = true;
      this._sig = '';
      return;
    }
    const agent = view.info.agent;
    const problem = view.model.problem;
    const login =
      (problem?.kind === 'needs_login' && problem !== this._handled) ||
      (!!view.startError &&
        /needs you to log in|authenticat/i.test(view.startError) &&
        this._handled !== view.startError);
    // fetched again once the agent runs: whether it offers logout is known from then
    const want = `${agent}|${login ? 'login' : ''}|${view.model.phase === 'ready' ? 'ready' : ''}`;
    if (want !== this._fetched) {
      this._fetched = want;
      void this._fetch(agent);
    }
    const s = this._settings && this._settings.name === agent ? this._settings : null;
    const showModel = !!s?.builtin && (!!s?.needs_model || this._forced === agent);
    const showLogin = login && !!s && s.auth_methods.length > 0;
    const showLogout = !showModel && !showLogin && !!s?.logout;
    const sig = JSON.stringify([
      agent,
      showModel,
      showLogin,
      showLogout,
      s,
      this._busy,
      this._error,
      !!this._models,
      this._forced,
      this._confirmLogout,
      this._held?.view === view ? this._held.text : null
    ]);
    if (sig === this._sig) {
      return;
    }
    this._sig = sig;
    this.node.textContent = '';
    this.node.hidden = !showModel && !showLogin && !showLogout;
    this.node.dataset.card = showModel ? 'model' : showLogin ? 'login' : showLogout ? 'logout' : '';
    if (showModel && s) {
      this._modelForm(s);
    } else if (showLogin && s) {
      this._loginCard(s, problem ?? view.startError);
    } else if (showLogout && s) {
      this._logoutRow(s);
    }
  }

  // -- logout ----------------------------------------------------------------------------------------
  private _confirmLogout = false;

  /** One line: "Log out", then "Log out of NAME? Log out / Keep"; the agent's next session asks for a login. */
  private _logoutRow(s: IAgentSettings): void {
    const row = el('div', 'jp-ACP-logoutRow');
    if (this._confirmLogout) {
      row.append(
        el(
          'span',
          'jp-ACP-muted',
          trans.__('Log out of %1? It asks you to log in again when it next needs to.', s.name)
        ),
        button(
          this._busy ? trans.__('Logging out…') : trans.__('Log out'),
          'jp-ACP-logoutYes',
          () => void this._logout(s)
        ),
        button(trans.__('Keep'), 'jp-ACP-logoutNo', () => {
          this._confirmLogout = false;
          this._host.renderChrome();
        })
      );
    } else {
      row.append(
        button(
          trans.__('Log out of %1', s.name),
          'jp-ACP-linkButton jp-ACP-logoutButton',
          () => {
            this._confirmLogout = true;
            this._error = '';
            this._host.renderChrome();
          },
          undefined,
          trans.__('Log out of %1: the account it works for', s.name)
        )
      );
    }
    if (this._error) {
      row.appendChild(el('div', 'jp-ACP-setupError', this._error));
    }
    this.node.appendChild(row);
  }

  private async _logout(s: IAgentSettings): Promise<void> {
    this._busy = true;
    this._host.renderChrome();
    try {
      this._settings = await logout(this._host.api, s.name);
      this._confirmLogout = false;
      this._host.flash(trans.__('Logged out of %1: it asks you to log in when it next needs to', s.name), 'info');
    } catch (err) {
      this._error = trans.__('Not logged out: %1', (err as Error).message);
    } finally {
      this._busy = false;
      this._host.renderChrome();
    }
  }

  private async _fetch(agent: string): Promise<void> {
    try {
      const s = await agentSettings(this._host.api, agent);
      if (this._host.view?.info.agent === agent) {
        this._settings = s;
        this._error = '';
        if (s.builtin && !this._models) {
          void agentModels(this._host.api, agent)
            .then(m => {
              this._models = m;
              this._host.renderChrome();
            })
            .catch(() => undefined); // suggestions are a help, the field takes any model
        }
      }
    } catch {
      this._settings = null; // an older server, or a reader: no card
    }
    this._host.renderChrome();
  }

  // -- the built-in agent's model ----------------------------------------------------------------
  private _modelForm(s: IAgentSettings): void {
    const form = el('form', 'jp-ACP-setupForm');
    form.setAttribute('aria-label', trans.__("The built-in agent's model"));
    const forced = !s.needs_model;
    const fixed = s.fixed_by_admin ?? {};
    form.append(
      el(
        'div',
        'jp-ACP-setupTitle',
        forced ? trans.__("The built-in agent's model and key") : trans.__('Choose a model for the built-in agent')
      ),
      el(
        'p',
        'jp-ACP-setupHint',
        fixed.model && fixed.key
          ? trans.__('Your admin set this agent’s model, endpoint and key on the server: they cannot be changed here.')
          : trans.__(
              'A litellm model string and its provider key. Both stay on this server, for this agent only (a private ' +
                "file); a variable set in Jupyter's environment wins. Saving restarts only this agent."
            )
      )
    );
    const listId = `jp-ACP-models-${++lists}`;
    const model = el('input', 'jp-ACP-setupInput jp-ACP-setupModel');
    model.name = 'model';
    model.placeholder = 'openai/gpt-4o-mini';
    model.setAttribute('list', listId);
    model.setAttribute('aria-label', trans.__('Model'));
    model.autocomplete = 'off';
    model.required = true;
    model.value = this._typed.model ?? s.model ?? '';
    const datalist = el('datalist');
    datalist.id = listId;
    for (const m of this._models?.suggestions ?? []) {
      const o = el('option');
      o.value = m;
      datalist.appendChild(o);
    }
    const keyVar = el('select', 'jp-ACP-setupInput jp-ACP-setupKeyVar');
    keyVar.setAttribute('aria-label', trans.__('Key variable'));
    const vars = this._models?.key_vars?.length ? this._models.key_vars : ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY'];
    for (const v of vars) {
      const o = el('option', '', v + (s.settings[v] && s.settings[v] !== 'unset' ? ` (${s.settings[v]})` : ''));
      o.value = v;
      keyVar.appendChild(o);
    }
    keyVar.value = vars.includes('OPENAI_API_KEY') ? 'OPENAI_API_KEY' : vars[0];
    if (this._typed.key_env && vars.includes(this._typed.key_env)) {
      keyVar.value = this._typed.key_env;
    }
    model.addEventListener('input', () => {
      // the model's provider names its key: openai/… → OPENAI_API_KEY
      const provider = model.value.split('/')[0];
      const keys = this._models?.provider_keys?.[provider];
      if (keys?.length) {
        keyVar.value = keys[0];
      }
    });
    const key = el('input', 'jp-ACP-setupInput jp-ACP-setupKey');
    key.type = 'password';
    key.name = 'key';
    key.autocomplete = 'off';
    key.placeholder = trans.__('API key (leave empty to keep the current one)');
    key.setAttribute('aria-label', trans.__('API key'));
    const base = el('input', 'jp-ACP-setupInput jp-ACP-setupBase');
    base.name = 'api_base';
    base.placeholder = trans.__('API base URL (optional: a local or compatible server)');
    base.setAttribute('aria-label', trans.__('API base URL'));
    base.autocomplete = 'off';
    // what was typed survives the card's rebuilds (Saving…, suggestions arriving) until a Save succeeds
    key.value = this._typed.key ?? '';
    base.value = this._typed.api_base ?? '';
    const remember = () => {
      this._typed = { model: model.value, key_env: keyVar.value, key: key.value, api_base: base.value };
    };
    for (const input of [model, keyVar, key, base]) {
      input.addEventListener('input', remember);
      input.addEventListener('change', remember);
    }
    const save = el(
      'button',
      'jp-ACP-button jp-ACP-setupSave',
      this._busy ? trans.__('Saving…') : trans.__('Save and restart the agent')
    );
    save.type = 'submit';
    save.disabled = this._busy;
    const actions = el('div', 'jp-ACP-setupActions');
    actions.appendChild(save);
    if (forced) {
      actions.appendChild(
        button(trans.__('Close'), 'jp-ACP-setupClose', () => {
          this._forced = null;
          this._host.renderChrome();
        })
      );
    }
    // what the admin fixed is shown greyed, with the reason (the server refuses it anyway)
    const fixedModel = fixed.model ?? fixed.api_base;
    model.disabled = base.disabled = !!fixedModel;
    keyVar.disabled = key.disabled = !!fixed.key;
    if (fixedModel) {
      base.placeholder = trans.__('set by your admin');
    }
    if (fixed.key) {
      key.placeholder = trans.__('from the server’s environment');
    }
    save.disabled = this._busy || (!!fixedModel && !!fixed.key);
    form.append(
      this._row(trans.__('Model'), model),
      datalist,
      ...this._fixedNote(fixedModel),
      this._row(trans.__('Key variable'), keyVar),
      this._row(trans.__('Key'), key),
      ...this._fixedNote(fixed.key),
      this._row(trans.__('API base'), base),
      actions
    );
    const held = this._held;
    if (held && held.view === this._host.view) {
      const waiting = el('div', 'jp-ACP-setupHeld');
      waiting.setAttribute('role', 'status');
      waiting.append(
        el('strong', '', trans.__('Your prompt waits for the model: ')),
        el('span', 'jp-ACP-setupHeldText', held.text),
        el('span', 'jp-ACP-muted', trans.__(' — it is sent when you save.'))
      );
      form.insertBefore(waiting, form.children[2] ?? null);
    }
    if (this._error) {
      form.appendChild(el('div', 'jp-ACP-setupError', this._error));
    }
    form.addEventListener('submit', e => {
      e.preventDefault();
      const body: any = fixedModel ? {} : { model: model.value.trim() };
      if (key.value && !fixed.key) {
        body.key_env = keyVar.value;
        body.key = key.value;
      }
      if (base.value.trim() && !fixedModel) {
        body.api_base = base.value.trim();
      }
      void this._save(s.name, body, () => {
        key.value = '';
        this._typed = {};
        this._sendHeld(s.name);
      });
    });
    this.node.appendChild(form);
  }

  /** "Set by your admin: REASON" under the fields the admin fixed (none when nothing is). */
  private _fixedNote(reason: string | undefined): HTMLElement[] {
    if (!reason) {
      return [];
    }
    const note = el('div', 'jp-ACP-setupFixed');
    note.dataset.fixedByAdmin = 'true';
    note.append(el('strong', '', trans.__('Set by your admin: ')), document.createTextNode(reason));
    return [note];
  }

  private _row(label: string, input: HTMLElement): HTMLElement {
    const row = el('label', 'jp-ACP-setupRow');
    row.append(el('span', 'jp-ACP-setupLabel', label), input);
    return row;
  }

  private async _save(agent: string, body: any, done: () => void): Promise<void> {
    this._busy = true;
    this._error = '';
    this._host.renderChrome();
    try {
      const s = await saveAgentSettings(this._host.api, agent, body);
      this._settings = s; // before `done`: a prompt it sends finds the agent set up
      this._forced = null;
      done();
      this._host.flash(s.notice || trans.__('Settings of %1 saved', agent), 'info');
      this._host.agentsChanged();
    } catch (err) {
      this._error = trans.__('Not saved: %1', (err as Error).message);
    } finally {
      this._busy = false;
      this._host.renderChrome();
    }
  }

  // -- login ---------------------------------------------------------------------------------------
  private _loginCard(s: IAgentSettings, problem: unknown): void {
    const card = el('div', 'jp-ACP-setupForm jp-ACP-loginCard');
    card.setAttribute('role', 'group');
    card.setAttribute('aria-label', trans.__('Log in to %1', s.name));
    card.append(
      el('div', 'jp-ACP-setupTitle', trans.__('%1 needs you to log in', s.name)),
      el('p', 'jp-ACP-setupHint', trans.__('Pick one of the ways it offers:'))
    );
    const fixedLogin = s.fixed_by_admin?.login;
    card.append(...this._fixedNote(fixedLogin));
    for (const m of s.auth_methods) {
      const row = el('div', 'jp-ACP-loginMethod');
      row.dataset.kind = m.kind;
      const text = el('div', 'jp-ACP-loginText');
      text.append(el('strong', '', m.name));
      if (m.description) {
        text.append(el('span', 'jp-ACP-muted', trans.__(' — %1', m.description)));
      }
      row.appendChild(text);
      if (m.kind === 'agent') {
        row.appendChild(
          button(
            this._busy ? trans.__('Logging in…') : trans.__('Log in'),
            'jp-ACP-loginButton',
            () => void this._authenticate(s, m, problem)
          )
        );
      } else if (m.kind === 'env_var') {
        for (const v of m.vars ?? []) {
          const input = el('input', 'jp-ACP-setupInput jp-ACP-loginVar');
          input.type = 'password';
          input.autocomplete = 'off';
          input.placeholder = s.settings[v] && s.settings[v] !== 'unset' ? `${v} (${s.settings[v]})` : v;
          input.setAttribute('aria-label', v);
          const save = button(trans.__('Save and restart'), 'jp-ACP-loginButton', () => {
            if (!input.value) {
              return;
            }
            void this._save(s.name, { env: { [v]: input.value } }, () => {
              input.value = '';
              this._handled = problem;
              this._retry();
            });
          });
          row.append(this._row(v, input), save);
        }
      } else if (m.kind === 'terminal' && m.command && m.refused) {
        row.append(
          el('code', 'jp-ACP-loginCommand', m.command),
          el('div', 'jp-ACP-setupError jp-ACP-loginRefused', m.refused)
        );
      } else if (m.kind === 'terminal' && m.command) {
        const open = button(trans.__('Open a terminal'), 'jp-ACP-loginButton', () => {
          if (this._canOpenTerminal()) {
            void this._openTerminal(s.name, m.id);
            this._terminalOpened = m.id;
            this._sig = '';
            this._host.renderChrome();
          }
        });
        open.disabled = !this._canOpenTerminal();
        if (open.disabled) {
          open.title = trans.__('Terminals are switched off on this server (ServerApp.terminals_enabled)');
        }
        row.append(el('code', 'jp-ACP-loginCommand', m.command), open);
        if (this._terminalOpened === m.id) {
          row.appendChild(
            button(trans.__('Retry'), 'jp-ACP-loginButton', () => {
              this._handled = problem;
              this._retry();
            })
          );
        }
      }
      const fixedHere = fixedLogin ?? (m.kind === 'env_var' ? s.fixed_by_admin?.key : undefined);
      if (fixedHere) {
        row.classList.add('jp-mod-fixed');
        row.querySelectorAll('button, input').forEach(x => {
          (x as HTMLButtonElement | HTMLInputElement).disabled = true;
          (x as HTMLElement).title = fixedHere;
        });
        if (!fixedLogin) {
          row.append(...this._fixedNote(fixedHere));
        }
      }
      card.appendChild(row);
    }
    if (this._error) {
      card.appendChild(el('div', 'jp-ACP-setupError', this._error));
    }
    this.node.appendChild(card);
  }

  private _terminalOpened = '';

  private _canOpenTerminal(): boolean {
    return !!this._host.commands?.hasCommand('terminal:open');
  }

  /** The agent's login, started by the server in a terminal of its own (its argument list, the agent's environment),
   * opened here by its name: nothing is typed into a shell. */
  private async _openTerminal(agent: string, methodId: string): Promise<void> {
    try {
      const started = await startLoginTerminal(this._host.api, agent, methodId);
      await this._host.commands!.execute('terminal:open', { name: started.name });
    } catch (err) {
      this._host.flash(trans.__('Could not open the login terminal: %1', (err as Error).message));
    }
  }

  /**
   * The model is saved: the prompt that waited for it goes now; or, when the prompt went before the form showed and
   * was answered that no model is configured, that prompt goes again.
   */
  private _sendHeld(agent: string): void {
    const view = this._host.view;
    const held = this._held;
    this._held = null;
    if (!view || view.info.agent !== agent) {
      return;
    }
    if (held && held.view === view) {
      this._host.resend(held.text);
      return;
    }
    const items = view.model.items;
    const answer = [...items].reverse().find(i => i.kind === 'message');
    if (answer && answer.kind === 'message' && /^No model is configured/.test(answer.text)) {
      const last = [...items].reverse().find(i => i.kind === 'user');
      if (last && last.kind === 'user' && items.indexOf(last) < items.indexOf(answer)) {
        this._retry();
      }
    }
  }

  /** The conversation's last prompt, sent again. */
  private _retry(): void {
    const items = this._host.view?.model.items ?? [];
    const last = [...items].reverse().find(i => i.kind === 'user');
    if (last && last.kind === 'user' && last.text.trim()) {
      this._host.resend(last.text);
    }
  }

  private async _authenticate(s: IAgentSettings, m: IAuthMethod, problem: unknown): Promise<void> {
    this._busy = true;
    this._error = '';
    this._host.renderChrome();
    try {
      this._settings = await authenticate(this._host.api, s.name, m.id);
      this._handled = problem;
      this._host.flash(trans.__('Logged in to %1; sending your prompt again', s.name), 'info');
      this._retry();
    } catch (err) {
      this._error = trans.__('Login failed: %1', (err as Error).message);
    } finally {
      this._busy = false;
      this._host.renderChrome();
    }
  }
}
