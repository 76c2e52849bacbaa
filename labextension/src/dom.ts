/** Small DOM helpers the sidebar's modules share. */
import type { LabIcon } from '@jupyterlab/ui-components';

/* eslint-disable @typescript-eslint/no-explicit-any */

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export function button(
  label: string,
  cls: string,
  onClick: () => void,
  icon?: LabIcon,
  title?: string
): HTMLButtonElement {
  const b = el('button', `jp-ACP-button ${cls}`);
  b.type = 'button';
  if (icon) {
    b.appendChild(icon.element({ tag: 'span', className: 'jp-ACP-buttonIcon' }));
  }
  if (label) {
    b.appendChild(el('span', 'jp-ACP-buttonLabel', label));
  }
  b.title = title ?? label;
  b.setAttribute('aria-label', title ?? label);
  b.addEventListener('click', e => {
    e.preventDefault();
    onClick();
  });
  return b;
}

export function pretty(value: any): string {
  if (typeof value === 'string') {
    return value;
  }
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}
