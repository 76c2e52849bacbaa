/**
 * The agent's choices as the panel offers them: session modes and config options as pickers, permission options
 * in a fixed order, and a line diff for previews. Pure functions over the shapes of `items.ts`.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */

import { trans } from './i18n';
import type { IChoice, IModes, IPermissionOption, IPicker } from './items';
import type { ISwitched } from './wire';

/** An option's id: `id` in ACP v1, `configId` in v2 drafts. */
export function optionId(opt: any): string {
  return String(opt?.id ?? opt?.configId ?? '');
}

/**
 * What the header offers for a session: the mode picker first (when the agent has at least two
 * modes and no config option of category "mode", which ACP says supersedes `modes`), then each
 * config option in the agent's order. Grouped select options are flattened with their group's name;
 * a current value missing from the choices is kept as a choice, so the control never lies.
 * Options of an unknown type, or selects with nothing to choose, are left out.
 */
export function pickersOf(modes: IModes | null | undefined, configOptions: any[] | null | undefined): IPicker[] {
  const out: IPicker[] = [];
  const options = Array.isArray(configOptions)
    ? configOptions.filter(o => o && typeof o === 'object' && optionId(o))
    : [];
  const available = Array.isArray(modes?.availableModes) ? modes!.availableModes!.filter(m => m && m.id) : [];
  if (available.length && !options.some(o => o.category === 'mode')) {
    const current = modes?.currentModeId ?? '';
    const choices: IChoice[] = available.map(m => ({
      value: String(m.id),
      name: String(m.name || m.id),
      description: m.description
    }));
    if (current && !choices.some(c => c.value === current)) {
      choices.push({ value: current, name: current });
    }
    out.push({
      kind: 'mode',
      id: 'mode',
      name: trans.__('Mode'),
      description: trans.__('How much the agent may do without asking'),
      value: current,
      choices
    });
  }
  for (const o of options) {
    const base = {
      id: optionId(o),
      name: String(o.name || optionId(o)),
      description: o.description ?? undefined,
      category: o.category ?? undefined
    };
    if (o.type === 'boolean') {
      out.push({ ...base, kind: 'boolean', value: o.currentValue === true, choices: [] });
      continue;
    }
    if (o.type !== 'select' && o.type !== undefined) {
      continue; // a control this client does not know
    }
    const choices: IChoice[] = [];
    for (const entry of Array.isArray(o.options) ? o.options : []) {
      if (entry && Array.isArray(entry.options)) {
        const group = String(entry.name ?? entry.group ?? '');
        for (const c of entry.options) {
          if (c && c.value !== undefined) {
            choices.push({
              value: String(c.value),
              name: String(c.name ?? c.value),
              description: c.description,
              group
            });
          }
        }
      } else if (entry && entry.value !== undefined) {
        choices.push({
          value: String(entry.value),
          name: String(entry.name ?? entry.value),
          description: entry.description
        });
      }
    }
    const current = o.currentValue === undefined || o.currentValue === null ? '' : String(o.currentValue);
    if (current && !choices.some(c => c.value === current)) {
      choices.unshift({ value: current, name: current });
    }
    if (!choices.length) {
      continue;
    }
    out.push({ ...base, kind: 'select', value: current, choices });
  }
  return out;
}

/** The option a keyboard shortcut or a policy should pick first, by ACP option kind. */
export function optionOrder(options: IPermissionOption[]): IPermissionOption[] {
  const rank: Record<string, number> = { allow_once: 0, allow_always: 1, reject_once: 2, reject_always: 3 };
  return [...options].sort((a, b) => (rank[a.kind] ?? 9) - (rank[b.kind] ?? 9));
}

/** A line diff (LCS-free, good enough for cell-sized texts): common prefix/suffix, then -/+ lines. */
export function lineDiff(oldText: string | null | undefined, newText: string): { op: ' ' | '-' | '+'; line: string }[] {
  const a = (oldText ?? '').split('\n');
  const b = newText.split('\n');
  if (!oldText) {
    return b.map(line => ({ op: '+' as const, line }));
  }
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) {
    start++;
  }
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out: { op: ' ' | '-' | '+'; line: string }[] = [];
  const ctx = 2;
  for (let i = Math.max(0, start - ctx); i < start; i++) {
    out.push({ op: ' ', line: a[i] });
  }
  for (let i = start; i < endA; i++) {
    out.push({ op: '-', line: a[i] });
  }
  for (let i = start; i < endB; i++) {
    out.push({ op: '+', line: b[i] });
  }
  for (let i = endA; i < Math.min(a.length, endA + ctx); i++) {
    out.push({ op: ' ', line: a[i] });
  }
  return out;
}

/**
 * What a switch said in the conversation's log: "Mode set to Plan", "Model set to GPT-5", "Thinking turned on",
 * named from the pickers of the state the switch made (the choice's name, not its id). Null when the pickers do not
 * show it (an option of a type the panel does not offer).
 */
export function switchedText(switched: ISwitched | undefined, pickers: IPicker[]): string | null {
  if (!switched) {
    return null;
  }
  const picker = pickers.find(p =>
    switched.kind === 'mode' ? p.kind === 'mode' : p.kind !== 'mode' && p.id === switched.id
  );
  if (!picker) {
    return null;
  }
  if (picker.kind === 'boolean') {
    return switched.value ? trans.__('%1 turned on', picker.name) : trans.__('%1 turned off', picker.name);
  }
  const value = String(switched.value);
  const choice = picker.choices.find(c => c.value === value);
  return trans.__('%1 set to %2', picker.name, choice?.name || value);
}
