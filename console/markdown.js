// Markdown, safely: what a message says is rendered as DOM nodes, never as markup.

import { h } from './dom.js';

/** Markdown's common subset as DOM nodes: every character of `text` stays text. */
export function markdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text).split('\n');
  const starts = /^(```|#{1,6}\s|\s*[-*+]\s|\s*\d+[.)]\s|>)/;
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.startsWith('```')) {
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith('```'); i++) code.push(lines[i]);
      i++;
      out.append(h('pre', { class: 'code' }, h('code', {}, code.join('\n'))));
    } else if (/^#{1,6}\s/.test(line)) {
      const [, hashes, title] = /^(#{1,6})\s+(.*)$/.exec(line);
      out.append(h(`h${Math.min(hashes.length + 2, 6)}`, {}, inline(title)));
      i++;
    } else if (/^\s*([-*+]|\d+[.)])\s/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? 'ol' : 'ul');
      const marker = ordered ? /^\s*\d+[.)]\s+/ : /^\s*[-*+]\s+/;
      for (; i < lines.length && marker.test(lines[i]); i++) {
        list.append(h('li', {}, inline(lines[i].replace(marker, ''))));
      }
      out.append(list);
    } else if (line.startsWith('>')) {
      const quote = [];
      for (; i < lines.length && lines[i].startsWith('>'); i++) quote.push(lines[i].replace(/^>\s?/, ''));
      out.append(h('blockquote', {}, markdown(quote.join('\n'))));
    } else if (!line.trim()) {
      i++;
    } else {
      const paragraph = h('p');
      for (let n = 0; i < lines.length && lines[i].trim() && (n === 0 || !starts.test(lines[i])); i++, n++) {
        if (n) paragraph.append(h('br'));
        paragraph.append(...inline(lines[i]));
      }
      out.append(paragraph);
    }
  }
  return out;
}

/** Inline code, bold, emphasis and http(s) links; anything else is left as it was typed. */
function inline(text) {
  const parts = [];
  const pattern = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) parts.push(text.slice(last, match.index));
    const [, code, bold, em, label, href] = match;
    if (code !== undefined) parts.push(h('code', {}, code));
    else if (bold !== undefined) parts.push(h('strong', {}, bold));
    else if (em !== undefined) parts.push(h('em', {}, em));
    else parts.push(h('a', { href, rel: 'noopener noreferrer nofollow', target: '_blank' }, label));
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return parts;
}
