/**
 * Images in the prompt: the composer's image tray (paste, drop, pick a file; thumbnails with a remove
 * button; the chip disabled, with the reason, for an agent without `promptCapabilities.image`), and the
 * "Attach to Agent Prompt" command on image outputs (a plot), in the output area's context menu.
 *
 * Images are sent as ACP image blocks `{type: "image", mimeType, data}`. Large ones are scaled down here
 * first (at most 1568 px a side, about 170 KB), so that they fit the server's limits, the model's and the
 * history's (the conversation replays them as thumbnails).
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ITranslator } from '@jupyterlab/translation';
import { imageIcon } from '@jupyterlab/ui-components';

import type { AcpApi, IAgentInfo } from './api';
import { el } from './dom';
import { setTranslator, trans } from './i18n';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** The image types a prompt may carry (the server refuses others). */
export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];
/** Past this size (bytes) or side (px) an image is scaled down before it is attached. */
export const TARGET_BYTES = 170 * 1024;
export const MAX_SIDE = 1568;
/** Most images waiting in one prompt. */
export const MAX_IMAGES = 6;
export const ATTACH_COMMAND = 'jupyter-acp:attach-image';

export interface IPromptImage {
  mimeType: string;
  data: string;
  /** What the thumbnail's tooltip says: where it came from, its size. */
  label: string;
}

/** What the tray needs from the composer. */
export interface IImageHost {
  readonly api: AcpApi;
  /** The agent of the conversation on screen. */
  agentName(): string | null;
  /** The bound notebook's path (images wait per notebook). */
  path(): string | null;
  flash(text: string, level?: string): void;
}

/** The tray of the composer in the sidebar (one sidebar, one tray): the attach command adds to it. */
let currentTray: ImageTray | null = null;

function register(tray: ImageTray): void {
  currentTray = tray;
}

function human(n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${Math.round(n / 1024)} KB` : `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function base64Size(data: string): number {
  return Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0);
}

function readDataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error(trans.__('the image could not be read')));
    reader.readAsDataURL(blob);
  });
}

function loadImage(src: string): Promise<HTMLImageElement> {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error(trans.__('the image could not be decoded')));
    img.src = src;
  });
}

function canvasBlob(canvas: HTMLCanvasElement, type: string, quality?: number): Promise<Blob> {
  return new Promise((resolve, reject) =>
    canvas.toBlob(b => (b ? resolve(b) : reject(new Error(trans.__('the image could not be encoded')))), type, quality)
  );
}

/**
 * An image as a prompt image: kept as it is when it is small (a PNG plot usually is), else drawn smaller
 * and encoded as JPEG until it fits `TARGET_BYTES`. Other types (SVG) are drawn as PNG.
 */
export async function fitImage(src: string, mimeType: string, bytes: number, origin: string): Promise<IPromptImage> {
  const img = await loadImage(src);
  const w = img.naturalWidth || img.width;
  const h = img.naturalHeight || img.height;
  const data = src.startsWith('data:') ? src.slice(src.indexOf(',') + 1) : '';
  if (IMAGE_TYPES.includes(mimeType) && data && bytes <= TARGET_BYTES && Math.max(w, h) <= MAX_SIDE) {
    return { mimeType, data, label: `${origin}: ${mimeType.slice(6).toUpperCase()}, ${w}×${h}, ${human(bytes)}` };
  }
  let scale = Math.min(1, MAX_SIDE / Math.max(w, h, 1));
  const canvas = document.createElement('canvas');
  for (let attempt = 0; attempt < 8; attempt++) {
    canvas.width = Math.max(1, Math.round(w * scale));
    canvas.height = Math.max(1, Math.round(h * scale));
    const ctx = canvas.getContext('2d')!;
    const lossless = !IMAGE_TYPES.includes(mimeType) && attempt === 0; // an SVG drawn once as PNG
    if (!lossless) {
      ctx.fillStyle = '#fff'; // JPEG has no transparency: transparent plots on white
      ctx.fillRect(0, 0, canvas.width, canvas.height);
    }
    ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
    const type = lossless ? 'image/png' : 'image/jpeg';
    const blob = await canvasBlob(canvas, type, lossless ? undefined : attempt < 2 ? 0.85 : 0.7);
    if (blob.size <= TARGET_BYTES) {
      const url = await readDataUrl(blob);
      const note = scale < 1 ? trans.__(', scaled from %1×%2', w, h) : '';
      return {
        mimeType: type,
        data: url.slice(url.indexOf(',') + 1),
        label: `${origin}: ${type.slice(6).toUpperCase()}, ${canvas.width}×${canvas.height}${note}, ${human(blob.size)}`
      };
    }
    if (attempt >= 1) {
      scale *= 0.75;
    }
  }
  throw new Error(trans.__('the image stays over %1 even scaled down', human(TARGET_BYTES)));
}

/** The images waiting to go with the next prompt, their chip, and paste / drop / pick. */
export class ImageTray {
  /** Thumbnails of the waiting images (above the input). */
  readonly node = el('div', 'jp-ACP-imageTray');
  /** The "Image" chip: picks a file; disabled, with the reason, when the agent takes no images. */
  readonly chip = el('button', 'jp-ACP-chip jp-ACP-imageChip');
  /** The chip and its (hidden) file picker, for the composer's row. */
  readonly control = el('span', 'jp-ACP-imageControl');
  private _file = el('input');
  private _waiting = new Map<string, IPromptImage[]>();
  private _support = new Map<string, boolean>();
  private _asking: Promise<void> | null = null;
  private _tries = new Map<string, number>();

  constructor(private readonly _host: IImageHost) {
    this.node.setAttribute('aria-label', trans.__('Images that go with the prompt'));
    this.node.hidden = true;
    this._file.type = 'file';
    this._file.accept = IMAGE_TYPES.join(',');
    this._file.multiple = true;
    this._file.hidden = true;
    this._file.addEventListener('change', () => {
      const files = Array.from(this._file.files ?? []);
      this._file.value = '';
      void this.addFiles(files, trans.__('file'));
    });
    this.chip.type = 'button';
    this.chip.append(
      imageIcon.element({ tag: 'span', className: 'jp-ACP-chipIcon' }),
      el('span', 'jp-ACP-chipLabel', trans.__('Image'))
    );
    this.chip.addEventListener('click', () => {
      if (this.supported() !== false) {
        this._file.click();
      }
    });
    this.control.append(this.chip, this._file);
    register(this);
  }

  /** Paste and drop of images into `input` and `zone`. */
  listen(input: HTMLElement, zone: HTMLElement): void {
    input.addEventListener('paste', (e: ClipboardEvent) => {
      const files = Array.from(e.clipboardData?.files ?? []).filter(f => f.type.startsWith('image/'));
      if (!files.length) {
        return;
      }
      // an image copied from a page often comes with its HTML or URL as text: the image is what was meant
      e.preventDefault();
      void this.addFiles(files, trans.__('pasted'));
    });
    zone.addEventListener('dragover', (e: DragEvent) => {
      if (Array.from(e.dataTransfer?.items ?? []).some(i => i.kind === 'file' && i.type.startsWith('image/'))) {
        e.preventDefault();
        zone.classList.add('jp-mod-dropTarget');
      }
    });
    zone.addEventListener('dragleave', () => zone.classList.remove('jp-mod-dropTarget'));
    zone.addEventListener('drop', (e: DragEvent) => {
      zone.classList.remove('jp-mod-dropTarget');
      const files = Array.from(e.dataTransfer?.files ?? []).filter(f => f.type.startsWith('image/'));
      if (files.length) {
        e.preventDefault();
        void this.addFiles(files, trans.__('dropped'));
      }
    });
  }

  /** Does the conversation's agent take images: true, false, or null (not known yet: its process is starting). */
  supported(): boolean | null {
    const agent = this._host.agentName();
    if (!agent) {
      return null;
    }
    const known = this._support.get(agent);
    if (known === undefined && !this._asking) {
      this._asking = this._host.api
        .agents()
        .then((agents: IAgentInfo[]) => {
          for (const a of agents) {
            if (a.prompt_capabilities) {
              this._support.set(a.name, a.prompt_capabilities.image === true);
            }
          }
        })
        .catch(() => undefined)
        .finally(() => {
          this._asking = null;
          const tries = (this._tries.get(agent) ?? 0) + 1;
          this._tries.set(agent, tries);
          if (this._support.has(agent)) {
            this.refresh();
          } else if (tries < 60 && this._host.agentName() === agent) {
            // its process is still starting: ask again in a moment
            setTimeout(() => this.refresh(), 1000);
          }
        });
    }
    return known ?? null;
  }

  /** Why images cannot go to this agent (empty when they can). */
  refusal(): string {
    return this.supported() === false
      ? trans.__(
          'The agent “%1” does not take images (it does not advertise promptCapabilities.image). ' +
            'Pick an agent that does (the built-in agent with a vision model, or echo) to attach one.',
          this._host.agentName()
        )
      : '';
  }

  private _list(): IPromptImage[] {
    const path = this._host.path();
    return path ? (this._waiting.get(path) ?? []) : [];
  }

  /** Draw the chip and the thumbnails of the bound notebook's waiting images. */
  refresh(): void {
    const why = this.refusal();
    this.chip.disabled = !!why;
    this.chip.setAttribute('aria-disabled', String(!!why));
    this.chip.title =
      why ||
      trans.__(
        'Attach an image (or paste or drop one into the message box; right-click a plot: Attach to Agent Prompt)'
      );
    this.chip.setAttribute(
      'aria-label',
      why ? trans.__('Attach an image (unavailable: the agent takes no images)') : trans.__('Attach an image')
    );
    const images = this._list();
    this.node.textContent = '';
    this.node.hidden = images.length === 0;
    images.forEach((image, i) => {
      const item = el('span', 'jp-ACP-imageThumb');
      item.title = image.label;
      const img = el('img');
      img.src = `data:${image.mimeType};base64,${image.data}`;
      img.alt = image.label;
      const remove = el('button', 'jp-ACP-imageRemove', '×');
      remove.type = 'button';
      remove.title = trans.__('Remove this image');
      remove.setAttribute('aria-label', trans.__('Remove image %1', i + 1));
      remove.addEventListener('click', () => {
        images.splice(i, 1);
        this.refresh();
      });
      item.append(img, remove);
      this.node.appendChild(item);
    });
  }

  async addFiles(files: File[], origin: string): Promise<void> {
    for (const f of files) {
      if (!IMAGE_TYPES.includes(f.type) && f.type !== 'image/svg+xml') {
        this._host.flash(
          f.type
            ? trans.__('%1 is %2: attach a PNG, JPEG, GIF or WebP image.', f.name || trans.__('This file'), f.type)
            : trans.__('%1 is not an image: attach a PNG, JPEG, GIF or WebP image.', f.name || trans.__('This file')),
          'warning'
        );
        continue;
      }
      await this.addUrl(await readDataUrl(f), f.type, f.size, f.name ? `${origin} ${f.name}` : origin);
    }
  }

  /** Attach an image (a data: URL, or any URL the page may read) to the notebook's next prompt. */
  async addUrl(src: string, mimeType: string, bytes: number, origin: string, path?: string): Promise<boolean> {
    const why = this.refusal();
    if (why) {
      this._host.flash(why, 'warning');
      return false;
    }
    const where = path ?? this._host.path();
    if (!where) {
      this._host.flash(trans.__('Open a notebook first: images go with the prompt of its conversation.'), 'warning');
      return false;
    }
    const list = this._waiting.get(where) ?? [];
    if (list.length >= MAX_IMAGES) {
      this._host.flash(trans.__('At most %1 images go with one prompt: remove one first.', MAX_IMAGES), 'warning');
      return false;
    }
    try {
      list.push(await fitImage(src, mimeType, bytes, origin));
    } catch (err) {
      this._host.flash(trans.__('The image was not attached: %1.', (err as Error).message), 'warning');
      return false;
    }
    this._waiting.set(where, list);
    this.refresh();
    return true;
  }

  /** The waiting images as ACP image blocks, taken out of the tray (`restore` puts them back). */
  take(): { blocks: any[]; images: IPromptImage[] } {
    const images = this._list();
    const path = this._host.path();
    if (path) {
      this._waiting.delete(path);
    }
    this.refresh();
    return { blocks: images.map(im => ({ type: 'image', mimeType: im.mimeType, data: im.data })), images };
  }

  restore(images: IPromptImage[]): void {
    const path = this._host.path();
    if (path && images.length) {
      this._waiting.set(path, [...images, ...(this._waiting.get(path) ?? [])]);
      this.refresh();
    }
  }

  get count(): number {
    return this._list().length;
  }
}

/** The output image under the context menu (`.jp-OutputArea-output img`). */
function targetImage(app: JupyterFrontEnd): HTMLImageElement | null {
  const node = app.contextMenuHitTest(n => n.tagName === 'IMG' && !!n.closest('.jp-OutputArea-output'));
  return (node as HTMLImageElement | undefined) ?? null;
}

function mimeOf(src: string): string {
  const m = /^data:([a-z]+\/[a-z0-9.+-]+)[;,]/i.exec(src);
  return m ? m[1].toLowerCase() : 'image/png';
}

/**
 * "Attach to Agent Prompt" on image outputs: the plot goes to the image tray of its notebook's conversation,
 * and the agent panel opens on that notebook.
 */
export const attachPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-acp-host:attach-image',
  description: 'Attach an image output (a plot) to the agent prompt of its notebook.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, translator: ITranslator | null) => {
    if (translator) {
      setTranslator(translator); // the same one the sidebar's plugin sets: whichever activates first
    }
    app.commands.addCommand(ATTACH_COMMAND, {
      label: () =>
        currentTray?.supported() === false
          ? trans.__('Attach to Agent Prompt (the agent takes no images)')
          : trans.__('Attach to Agent Prompt'),
      caption: () =>
        currentTray?.refusal() || trans.__('Send this image with your next prompt to the agent of this notebook'),
      icon: imageIcon,
      isEnabled: () => !!currentTray && currentTray.supported() !== false,
      execute: async () => {
        const img = targetImage(app);
        const tray = currentTray;
        if (!img || !tray) {
          return;
        }
        const notebook = tracker.find(nb => nb.node.contains(img));
        if (notebook) {
          app.shell.activateById(notebook.id); // the panel follows the notebook in focus
        }
        app.shell.activateById('jupyter-acp-sidebar');
        const src = img.currentSrc || img.src;
        const mime = mimeOf(src);
        const bytes = src.startsWith('data:') ? base64Size(src.slice(src.indexOf(',') + 1)) : TARGET_BYTES + 1;
        const cell = notebook?.content.widgets.findIndex(c => c.node.contains(img)) ?? -1;
        const origin = cell >= 0 ? trans.__('output of cell %1', cell + 1) : trans.__('cell output');
        await tray.addUrl(src, mime, bytes, origin, notebook?.context.localPath);
      }
    });
    app.contextMenu.addItem({ command: ATTACH_COMMAND, selector: '.jp-OutputArea-output img', rank: 0 });
  }
};
