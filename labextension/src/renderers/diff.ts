/** Diffs: an edit's old and new text line by line, and a text that may be a unified diff. */
import { el } from '../dom';
import { lineDiff } from '../model';

/* eslint-disable @typescript-eslint/no-explicit-any */

export function diff(c: any): HTMLElement {
  const box = el('div', 'jp-ACP-diff');
  box.appendChild(el('div', 'jp-ACP-diffPath', String(c.path ?? '')));
  const pre = el('pre', 'jp-ACP-diffBody');
  for (const { op, line } of lineDiff(c.oldText, String(c.newText ?? ''))) {
    const row = el('div', `jp-ACP-diffLine jp-mod-${op === '+' ? 'add' : op === '-' ? 'del' : 'ctx'}`);
    row.textContent = `${op} ${line}`;
    pre.appendChild(row);
  }
  box.appendChild(pre);
  return box;
}

/** A text that may be a unified diff: colour its lines. */
export function textPreview(text: string): HTMLElement {
  const pre = el('pre', 'jp-ACP-pre jp-ACP-preview');
  const isDiff = /^(---|\+\+\+|@@) /m.test(text);
  for (const line of text.split('\n')) {
    const row = el('div', 'jp-ACP-diffLine');
    if (isDiff && line.startsWith('+') && !line.startsWith('+++')) {
      row.classList.add('jp-mod-add');
    } else if (isDiff && line.startsWith('-') && !line.startsWith('---')) {
      row.classList.add('jp-mod-del');
    }
    row.textContent = line;
    pre.appendChild(row);
  }
  return pre;
}
