// A session's items as a chat: messages as bubbles, a tool call folded with its output.

import { act, api } from '../api.js';
import { confirmAction } from '../dialogs.js';
import { enc, h, json, sessionPath, when } from '../dom.js';
import { markdown } from '../markdown.js';

export function textOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  return content.map((part) => (part && typeof part.text === 'string' ? part.text : `[${(part && part.type) || 'part'}]`)).join('\n');
}

export const isMessage = (body) => typeof body.role === 'string' && (body.type === undefined || body.type === 'message');

/** The history as bubbles; a function call and its output fold into one block. */
export function itemViews(items, state, reloadAll) {
  const outputs = new Map();
  for (const entry of items) {
    if (entry.item.type === 'function_call_output') outputs.set(entry.item.call_id, entry);
  }
  const folded = new Set();
  const views = [];
  for (const entry of items) {
    if (folded.has(entry.id)) continue;
    const output = entry.item.type === 'function_call' ? outputs.get(entry.item.call_id) : undefined;
    if (output) folded.add(output.id);
    views.push(itemView(entry, output, state, reloadAll));
  }
  return views;
}

function itemView(entry, output, state, reloadAll) {
  const body = entry.item;
  let kind;
  let content;
  if (isMessage(body) && textOf(body.content) !== null) {
    kind = `message ${['user', 'assistant'].includes(body.role) ? body.role : 'system'}`;
    content = h('div', { class: 'bubble' },
      h('span', { class: 'role' }, body.role, body.status === 'incomplete' ? ' (incomplete)' : ''),
      h('div', { class: 'text' }, markdown(textOf(body.content))));
  } else if (body.type === 'function_call' || body.type === 'function_call_output') {
    kind = 'tool';
    const call = body.type === 'function_call' ? body : null;
    const result = call ? output && output.item : body;
    content = h('details', { class: 'tool-call' },
      h('summary', {}, call ? `tool call ${call.name}(${call.arguments || ''})` : `tool output for ${body.call_id}`,
        call && !result ? h('span', { class: 'muted' }, ' — no output yet') : ''),
      call ? h('p', { class: 'small muted' }, `call ${call.call_id}`) : null,
      call ? h('pre', { class: 'mono' }, prettyArguments(call.arguments)) : null,
      result ? h('p', { class: 'small' }, 'Output') : null,
      result ? h('pre', { class: 'mono output' }, typeof result.output === 'string' ? result.output : json(result.output)) : null);
  } else if (body.type === 'mcp_call') {
    // An MCP call holds its own output, or its error.
    kind = 'tool';
    const failed = typeof body.error === 'string';
    content = h('details', { class: 'tool-call' },
      h('summary', {}, `tool call ${body.server_label}.${body.name}(${body.arguments || ''})`,
        failed ? h('span', { class: 'muted' }, ' — failed') : ''),
      h('p', { class: 'small muted' }, `MCP server ${body.server_label}`),
      h('pre', { class: 'mono' }, prettyArguments(body.arguments)),
      h('p', { class: 'small' }, failed ? 'Error' : 'Output'),
      h('pre', { class: 'mono output' }, failed ? body.error : String(body.output ?? '')));
  } else {
    kind = 'other';
    content = h('div', {}, h('span', { class: 'role' }, body.type || 'item'), h('pre', { class: 'mono' }, json(body)));
  }
  const raw = h('pre', { class: 'mono raw', hidden: true }, json(output ? [entry, output] : entry));
  const toggle = h('button', { type: 'button', class: 'quiet small raw-toggle', 'aria-pressed': 'false' }, 'Raw JSON');
  toggle.addEventListener('click', () => {
    const showing = raw.hidden;
    raw.hidden = !showing;
    content.hidden = showing;
    toggle.setAttribute('aria-pressed', String(showing));
  });
  const last = output || entry;
  const branch = h('button', { type: 'button', class: 'quiet small fork', title: 'A new session with the history up to here' }, 'Branch from here');
  branch.addEventListener('click', act(branch, async () => {
    const fork = await api('POST', `${sessionPath(state.id)}/fork`, { through_item_id: last.id });
    location.hash = `#/sessions/${enc(fork.id)}`;
  }));
  const remove = h('button', { type: 'button', class: 'quiet small danger delete-item' }, 'Delete');
  remove.addEventListener('click', act(remove, async () => {
    const what = output ? `items #${entry.seq} and #${output.seq}` : `item #${entry.seq}`;
    if (!(await confirmAction(`Delete ${what} from this session's history?`, 'Delete'))) return;
    for (const gone of output ? [entry, output] : [entry]) {
      await api('DELETE', `${sessionPath(state.id)}/items/${enc(gone.id)}`);
    }
    await reloadAll();
  }));
  return h('article', { class: `item ${kind}`, dataset: { itemId: entry.id, seq: entry.seq } },
    content, raw,
    h('div', { class: 'item-tools' },
      h('span', { class: 'muted small' }, `#${entry.seq} · ${when(entry.created_at)}`),
      toggle, branch, remove));
}

export function prettyArguments(text) {
  try {
    return json(JSON.parse(text));
  } catch {
    return String(text ?? '');
  }
}
