/**
 * An agent's question (ACP `elicitation/create`). Form mode: its JSON schema as a form (text, email, URL and
 * date fields, numbers with their bounds, choices as a select, booleans as a checkbox; required fields marked,
 * defaults filled), with Submit, Decline and Cancel. URL mode: the URL as a link the user opens (its host spelled
 * out; never opened for them; http and https only), with Decline and Cancel. Once answered (or after a replay):
 * what was answered. The server validates the content against the schema again; its 400 says which field.
 */
import { button, el } from '../dom';
import type { IElicitationItem } from '../model';
import type { IEntry, SessionView } from '../session';
import type { IRenderContext } from './context';
import { answeredBy } from '../people';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** A select's choices from `enum` (with `enumNames`), or `oneOf` / `anyOf` of `{const, title}`. */
export function choicesOf(prop: any): { value: string; title: string }[] | null {
  if (Array.isArray(prop?.enum)) {
    const names = Array.isArray(prop.enumNames) ? prop.enumNames : [];
    return prop.enum.map((v: any, i: number) => ({ value: String(v), title: String(names[i] ?? v) }));
  }
  const alts = Array.isArray(prop?.oneOf) ? prop.oneOf : Array.isArray(prop?.anyOf) ? prop.anyOf : null;
  if (alts && alts.every((a: any) => a && a.const !== undefined)) {
    return alts.map((a: any) => ({ value: String(a.const), title: String(a.title ?? a.const) }));
  }
  return null;
}

/** The host of an http(s) URL, or null: any other scheme is never a link. */
export function httpHost(url: string | undefined): string | null {
  try {
    const u = new URL(String(url ?? ''));
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname ? u.hostname : null;
  } catch {
    return null;
  }
}

const INPUT_TYPES: Record<string, string> = { email: 'email', uri: 'url', date: 'date' };

interface IField {
  name: string;
  prop: any;
  read: () => { value?: any; empty: boolean };
}

function fieldRow(name: string, prop: any, required: boolean, idBase: string): { row: HTMLElement; field: IField } {
  const row = el('div', 'jp-ACP-elicitField');
  const id = `${idBase}-${name.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const label = el('label', 'jp-ACP-elicitLabel', String(prop?.title ?? name));
  label.htmlFor = id;
  if (required) {
    const star = el('span', 'jp-ACP-elicitRequired', ' *');
    star.title = 'required';
    star.setAttribute('aria-hidden', 'true');
    label.appendChild(star);
  }
  row.appendChild(label);
  const type = String(prop?.type ?? 'string');
  const choices = choicesOf(prop);
  let field: IField;
  if (type === 'array') {
    // a multi-select: one checkbox per choice, in a group named by the field's label
    const group = el('div', 'jp-ACP-elicitChoices');
    group.setAttribute('role', 'group');
    group.id = id;
    label.removeAttribute('for');
    label.id = `${id}-label`;
    group.setAttribute('aria-labelledby', label.id);
    const defaults: string[] = Array.isArray(prop?.default) ? prop.default.map(String) : [];
    const boxes: HTMLInputElement[] = [];
    (choicesOf(prop?.items) ?? []).forEach((c, i) => {
      const line = el('label', 'jp-ACP-elicitChoice');
      const box = el('input', 'jp-ACP-elicitCheckbox');
      box.type = 'checkbox';
      box.value = c.value;
      box.id = `${id}-${i}`;
      box.checked = defaults.includes(c.value);
      line.appendChild(box);
      line.appendChild(document.createTextNode(` ${c.title}`));
      group.appendChild(line);
      boxes.push(box);
    });
    row.appendChild(group);
    field = {
      name,
      prop,
      read: () => {
        const values = boxes.filter(b => b.checked).map(b => b.value);
        return values.length ? { value: values, empty: false } : { empty: true };
      }
    };
  } else if (type === 'boolean') {
    const box = el('input', 'jp-ACP-elicitCheckbox');
    box.type = 'checkbox';
    box.id = id;
    box.checked = prop?.default === true;
    row.insertBefore(box, label); // the box before its label, as checkboxes read
    row.classList.add('jp-mod-checkbox');
    field = { name, prop, read: () => ({ value: box.checked, empty: false }) };
  } else if (choices) {
    const select = el('select', 'jp-ACP-elicitInput');
    select.id = id;
    if (!required || prop?.default === undefined) {
      const none = el('option', '', required ? 'Choose…' : '(none)');
      none.value = '';
      select.appendChild(none);
    }
    for (const c of choices) {
      const o = el('option', '', c.title);
      o.value = c.value;
      select.appendChild(o);
    }
    if (prop?.default !== undefined) {
      select.value = String(prop.default);
    }
    field = {
      name,
      prop,
      read: () => {
        if (select.value === '') {
          return { empty: true };
        }
        const raw = [...(prop.enum ?? (prop.oneOf ?? prop.anyOf ?? []).map((a: any) => a.const))].find(
          (v: any) => String(v) === select.value
        );
        return { value: raw ?? select.value, empty: false };
      }
    };
    select.required = required;
    row.appendChild(select);
  } else {
    const input = el('input', 'jp-ACP-elicitInput');
    input.id = id;
    const numeric = type === 'number' || type === 'integer';
    input.type = numeric ? 'number' : (INPUT_TYPES[String(prop?.format)] ?? 'text');
    if (numeric) {
      input.step = type === 'integer' ? '1' : 'any';
      if (typeof prop?.minimum === 'number') {
        input.min = String(prop.minimum);
      }
      if (typeof prop?.maximum === 'number') {
        input.max = String(prop.maximum);
      }
    } else {
      if (typeof prop?.minLength === 'number') {
        input.minLength = prop.minLength;
      }
      if (typeof prop?.maxLength === 'number') {
        input.maxLength = prop.maxLength;
      }
    }
    if (prop?.default !== undefined && prop.default !== null) {
      input.value = String(prop.default);
    }
    input.required = required;
    field = {
      name,
      prop,
      read: () => {
        if (input.value === '') {
          return { empty: true };
        }
        return { value: numeric ? Number(input.value) : input.value, empty: false };
      }
    };
    row.appendChild(input);
  }
  if (required) {
    row.querySelector('input, select, [role="group"]')?.setAttribute('aria-required', 'true');
  }
  if (prop?.description) {
    const hint = el('div', 'jp-ACP-elicitHint', String(prop.description));
    hint.id = `${id}-hint`;
    row.querySelector('input, select')?.setAttribute('aria-describedby', hint.id);
    row.appendChild(hint);
  }
  return { row, field };
}

function answered(item: IElicitationItem): HTMLElement {
  const r = item.resolved!;
  const box = el('div', 'jp-ACP-elicitResult');
  const reason = r.reason ? ` (${r.reason})` : '';
  if (item.mode === 'url') {
    const host = item.urlHost ?? httpHost(item.url) ?? '';
    if (r.action === 'accept') {
      box.textContent = item.completed
        ? `Opened ${host}: the agent says this step is done.`
        : `Opened ${host}: waiting for the agent to say the step is done.`;
    } else {
      box.textContent =
        (item.completed
          ? 'Closed: the agent says this step is done'
          : r.action === 'decline'
            ? 'Declined'
            : 'Cancelled') +
        reason +
        '.';
    }
    return box;
  }
  if (r.action !== 'accept') {
    box.textContent = `${r.action === 'decline' ? 'Declined' : 'Cancelled'}${reason}.`;
    return box;
  }
  box.appendChild(el('div', '', 'Submitted:'));
  const list = el('dl', 'jp-ACP-elicitAnswers');
  const props = item.schema?.properties ?? {};
  for (const [key, value] of Object.entries(r.content ?? {})) {
    const prop = props[key] ?? {};
    const options = choicesOf(prop) ?? choicesOf(prop.items) ?? [];
    const titleOf = (v: unknown) => options.find(c => c.value === String(v))?.title ?? String(v);
    const title = Array.isArray(value) ? value.map(titleOf).join(', ') : options.length ? titleOf(value) : undefined;
    list.appendChild(el('dt', '', String(prop.title ?? key)));
    list.appendChild(el('dd', '', title ?? (typeof value === 'boolean' ? (value ? 'yes' : 'no') : String(value))));
  }
  box.appendChild(list);
  return box;
}

export function renderElicitation(ctx: IRenderContext, view: SessionView, item: IElicitationItem, entry: IEntry): void {
  const n = entry.node;
  n.className = 'jp-ACP-item jp-ACP-elicitation';
  n.classList.toggle('jp-mod-resolved', !!item.resolved);
  n.dataset.elicitationId = item.elicitationId;
  n.dataset.mode = item.mode;
  n.textContent = '';
  n.hidden = false;
  n.setAttribute('role', 'group');
  n.setAttribute('aria-label', 'The agent asks');
  n.appendChild(el('div', 'jp-ACP-elicitTitle', 'The agent asks'));
  n.appendChild(el('div', 'jp-ACP-elicitMessage', item.message));
  if (item.resolved) {
    n.appendChild(answered(item));
    const { actor, action, at } = item.resolved;
    if (actor && !item.completed) {
      const answer = action === 'accept' ? 'answered' : action === 'decline' ? 'declined' : 'cancelled';
      n.appendChild(el('div', 'jp-ACP-elicitBy', answeredBy(answer, actor, ctx.me(), at)));
    }
    return;
  }
  const error = el('div', 'jp-ACP-elicitError');
  error.setAttribute('role', 'alert');
  error.hidden = true;
  const buttons: HTMLButtonElement[] = [];
  const send = (action: string, content?: unknown) => {
    buttons.forEach(b => (b.disabled = true));
    error.hidden = true;
    ctx.api.elicit(view.info.id, item.elicitationId, action, content).catch(err => {
      buttons.forEach(b => (b.disabled = false));
      error.textContent = `Not sent: ${(err as Error).message}`;
      error.hidden = false;
    });
  };
  const row = el('div', 'jp-ACP-elicitButtons');
  if (item.mode === 'url') {
    const host = httpHost(item.url);
    if (host) {
      const where = el('div', 'jp-ACP-elicitUrl');
      where.appendChild(el('span', '', 'Opens '));
      where.appendChild(el('strong', 'jp-ACP-elicitHost', host));
      where.appendChild(el('span', 'jp-ACP-elicitFullUrl', ` (${item.url})`));
      n.appendChild(where);
      const link = el('a', 'jp-ACP-button jp-ACP-elicitOpen', `Open ${host}`);
      link.href = item.url!;
      link.target = '_blank';
      link.rel = 'noopener noreferrer';
      link.title = `Open ${item.url} in a new tab (the agent is told you opened it)`;
      link.addEventListener('click', () => send('accept'));
      row.appendChild(link);
    } else {
      n.appendChild(
        el('div', 'jp-ACP-elicitError', 'The agent sent a link that is not http or https; it is not shown.')
      );
    }
  } else {
    const schema = item.schema ?? {};
    const required: string[] = Array.isArray(schema.required) ? schema.required : [];
    const form = el('form', 'jp-ACP-elicitForm');
    form.noValidate = true; // the server says which field is wrong, in words
    const fields: IField[] = [];
    for (const [name, prop] of Object.entries<any>(schema.properties ?? {})) {
      const { row: r, field } = fieldRow(name, prop, required.includes(name), `jp-ACP-elicit-${item.elicitationId}`);
      fields.push(field);
      form.appendChild(r);
    }
    const submit = () => {
      const content: Record<string, unknown> = {};
      const missing: string[] = [];
      for (const f of fields) {
        const { value, empty } = f.read();
        if (empty) {
          if (required.includes(f.name)) {
            missing.push(String(f.prop?.title ?? f.name));
          }
          continue;
        }
        content[f.name] = value;
      }
      if (missing.length) {
        error.textContent = `Required: ${missing.join(', ')}`;
        error.hidden = false;
        return;
      }
      send('accept', content);
    };
    form.addEventListener('submit', e => {
      e.preventDefault();
      submit();
    });
    n.appendChild(form);
    const b = button(
      'Submit',
      'jp-ACP-option jp-mod-allow jp-ACP-elicitSubmit',
      submit,
      undefined,
      // the visible word leads the accessible name (WCAG 2.5.3, "label in name")
      'Submit: send these answers to the agent'
    );
    b.type = 'submit'; // Enter in a field submits, as in any form
    buttons.push(b);
    row.appendChild(b);
    form.appendChild(row);
  }
  const decline = button(
    'Decline',
    'jp-ACP-option jp-mod-reject',
    () => send('decline'),
    undefined,
    'Tell the agent you decline'
  );
  const cancel = button(
    'Cancel',
    'jp-ACP-option jp-mod-neutral',
    () => send('cancel'),
    undefined,
    'Cancel: dismiss without an answer'
  );
  buttons.push(decline, cancel);
  row.appendChild(decline);
  row.appendChild(cancel);
  if (row.parentElement) {
    row.parentElement.insertBefore(error, row); // the error just above the buttons, inside the form
  } else {
    n.appendChild(error);
    n.appendChild(row);
  }
}
