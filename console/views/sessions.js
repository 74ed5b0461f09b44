// The list of sessions, filtered by metadata, a page at a time; and a new session.

import { act, api } from '../api.js';
import { enc, h, when } from '../dom.js';
import { ready, setMain } from '../page.js';

const SESSIONS_PAGE = 50;

/** `k=v, k2=v2` into pairs; what has no `=` is ignored. */
function parseFilter(text) {
  return text.split(',').map((pair) => pair.split('=')).filter((kv) => kv.length >= 2 && kv[0].trim())
    .map(([key, ...value]) => [key.trim(), value.join('=').trim()]);
}

export async function sessionsView(params) {
  const filter = params.get('metadata') || '';
  const go = (extra) => {
    const next = new URLSearchParams();
    if (filter) next.set('metadata', filter);
    for (const [k, v] of Object.entries(extra)) next.set(k, v);
    location.hash = `#/sessions?${next}`;
  };
  const filterInput = h('input', { id: 'filter', value: filter, placeholder: 'team=support, user=42' });
  const filterForm = h('form', { class: 'row', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    if (filterInput.value.trim()) next.set('metadata', filterInput.value.trim());
    location.hash = `#/sessions?${next}`;
  } },
  h('label', { for: 'filter' }, 'Metadata filter'), filterInput, h('button', { type: 'submit' }, 'Filter'));

  const list = h('ul', { class: 'cards', id: 'sessions' });
  const pager = h('nav', { class: 'row pager', 'aria-label': 'Pages' });
  setMain(
    h('div', { class: 'row spread' }, h('h1', {}, 'Sessions'), newSessionForm()),
    filterForm,
    list,
    pager,
  );

  const query = new URLSearchParams({ limit: SESSIONS_PAGE });
  for (const [key, value] of parseFilter(filter)) query.append(`metadata[${key}]`, value);
  for (const cursor of ['after', 'before']) if (params.get(cursor)) query.set(cursor, params.get(cursor));
  const page = await api('GET', `/v1/sessions?${query}`);
  if (!page.data.length) list.append(h('li', { class: 'muted' }, filter ? 'No session matches this filter.' : 'No sessions yet.'));
  for (const session of page.data) {
    list.append(h('li', { class: 'card' },
      h('a', { href: `#/sessions/${enc(session.id)}`, class: 'session-link' }, session.id),
      h('span', { class: 'muted small' },
        `${session.item_count} items · updated ${when(session.updated_at)}`,
        session.agent_id ? ` · agent ${session.agent_id}` : '',
      session.app_id ? ` · app ${session.app_id}` : '',
      session.user_id ? ` · user ${session.user_id}` : ''),
      metadataChips(session.metadata)));
  }
  const backwards = params.has('before');
  if (params.has('after') || (backwards && page.has_more)) {
    pager.append(h('button', { type: 'button', onclick: () => go({ before: page.first_id }) }, '← Newer'));
  }
  if (backwards || page.has_more) {
    pager.append(h('button', { type: 'button', id: 'next-page', onclick: () => go({ after: page.last_id }) }, 'Older →'));
  }
  ready('sessions');
}

export function metadataChips(metadata) {
  const entries = Object.entries(metadata || {});
  if (!entries.length) return null;
  return h('span', { class: 'chips' }, entries.map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`)));
}

function newSessionForm() {
  const id = h('input', { id: 'new-session-id', placeholder: 'generated if empty' });
  const metadata = h('input', { id: 'new-session-metadata', placeholder: 'team=support' });
  const errors = h('div');
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Create');
  const form = h('form', { class: 'stack' },
    h('label', { for: 'new-session-id' }, 'Id'), id,
    h('label', { for: 'new-session-metadata' }, 'Metadata (k=v, …)'), metadata,
    submit, errors);
  form.addEventListener('submit', act(submit, async () => {
    const body = {};
    if (id.value.trim()) body.id = id.value.trim();
    const pairs = parseFilter(metadata.value);
    if (pairs.length) body.metadata = Object.fromEntries(pairs);
    const session = await api('POST', '/v1/sessions', body);
    location.hash = `#/sessions/${enc(session.id)}`;
  }, errors));
  return h('details', { class: 'new-session' }, h('summary', {}, 'New session'), form);
}
