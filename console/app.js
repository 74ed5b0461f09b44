// The agent-sessions console: plain DOM, no framework, no build step.
//
// Safety rule of this file: stored data (items, metadata, run errors, agent fields) only
// ever reaches the page as text — through `h()` (which appends text nodes) or
// `textContent`. Nothing here assigns `innerHTML`; the Content-Security-Policy the server
// sends forbids inline script as a second line of defence.
'use strict';

const KEY_STORAGE = 'agent-sessions.api-key';
const SESSIONS_PAGE = 50;
const ITEMS_PAGE = 100;
// The newest checkpoints a session's page shows.
const CHECKPOINTS_SHOWN = 20;

const $ = (selector, root = document) => root.querySelector(selector);

/** An element with properties and children; strings become text nodes, never markup. */
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.className = value;
    else if (name === 'text') el.textContent = value;
    else if (name === 'value') el.value = value;
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) el.append(child);
  }
  return el;
}

const enc = encodeURIComponent;
const sessionPath = (id) => `/v1/sessions/${enc(id)}`;
// One formatter for the page: `toLocaleString()` builds a new one per call, which made
// rendering 100 items take longer than fetching them.
const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });
const when = (ts) => (ts ? DATE_TIME.format(new Date(ts)) : '—');
const json = (value) => JSON.stringify(value, null, 2);

// ---------------------------------------------------------------- the API and its errors

/** A problem document from the API (or a network failure), with what a person needs. */
class ApiError extends Error {
  constructor(status, problem, requestId, retryAfter) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.code = problem.code || (status ? `http_${status}` : 'network_error');
    this.detail = problem.detail || problem.title || '';
    this.requestId = requestId;
    this.retryAfter = retryAfter;
  }
}

async function problemOf(response) {
  const text = await response.text();
  let problem;
  try {
    problem = JSON.parse(text);
  } catch {
    problem = { detail: text.slice(0, 500) };
  }
  const error = new ApiError(
    response.status,
    problem || {},
    response.headers.get('x-request-id'),
    response.headers.get('retry-after'),
  );
  if (response.status === 401) askForKey();
  return error;
}

/** Calls the API; resolves to the parsed body (or the response itself with `raw`). */
async function api(method, path, body, { raw = false, signal } = {}) {
  const headers = {};
  const key = sessionStorage.getItem(KEY_STORAGE);
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new ApiError(0, { code: 'network_error', detail: String(error.message || error) });
  }
  if (!response.ok) throw await problemOf(response);
  if (raw) return response;
  return response.status === 204 ? null : response.json();
}

const PLAIN = {
  401: 'Unauthorized: this service needs a valid API key.',
  403: 'Forbidden: this key may not do this (a read-only key, or the wrong kind of key).',
  429: 'Rate limited: too many requests with this key.',
};

/** An error as people read it: code, detail and the request id to quote in a report. */
function problemView(error) {
  const box = h('div', { class: 'problem', dataset: { code: error.code || '' } });
  if (PLAIN[error.status]) box.append(h('p', { class: 'plain', text: PLAIN[error.status] }));
  box.append(
    h('p', {},
      h('strong', { class: 'code' }, error.status ? `${error.status} ${error.code}` : error.code),
      ' ',
      h('span', { class: 'detail' }, error.detail || error.message)),
  );
  const facts = [];
  if (error.requestId) facts.push(h('span', {}, 'request id ', h('code', { class: 'request-id' }, error.requestId)));
  if (error.retryAfter) facts.push(h('span', {}, ` · retry after ${error.retryAfter} s`));
  if (facts.length) box.append(h('p', { class: 'small muted' }, facts));
  if (error.status === 401) {
    box.append(h('button', { type: 'button', onclick: askForKey }, 'Enter API key'));
  }
  return box;
}

/** Shows an error at the top of the page (or in `where`), or rethrows what is not ours. */
function report(error, where) {
  if (error && error.name === 'AbortError') return;
  if (!(error instanceof ApiError)) {
    console.error(error);
    error = new ApiError(0, { code: 'console_error', detail: String(error && error.message) });
  }
  const box = problemView(error);
  if (where) {
    where.replaceChildren(box);
    return;
  }
  const errors = $('#errors');
  box.append(h('button', { type: 'button', class: 'quiet small', onclick: () => box.remove() }, 'Dismiss'));
  errors.prepend(box);
  while (errors.children.length > 3) errors.lastChild.remove();
}

/** Runs an action from a button, showing its error; the button is disabled meanwhile. */
function act(button, action, where) {
  return async (event) => {
    if (event) event.preventDefault();
    if (button) button.disabled = true;
    try {
      await action();
    } catch (error) {
      report(error, where);
    } finally {
      if (button) button.disabled = false;
    }
  };
}

// ---------------------------------------------------------------- dialogs

/** Asks before a destructive action, in a modal dialog; resolves to true on "confirm". */
function confirmAction(text, label = 'Confirm') {
  const dialog = $('#confirm');
  $('#confirm-text').textContent = text;
  $('#confirm-ok').textContent = label;
  dialog.returnValue = '';
  dialog.showModal();
  $('#confirm-cancel').focus();
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
  });
}

function askForKey() {
  const dialog = $('#key-dialog');
  if (dialog.open) return;
  $('#key-input').value = '';
  dialog.showModal();
  $('#key-input').focus();
}

function setUpKeyDialog() {
  const dialog = $('#key-dialog');
  $('#key-button').addEventListener('click', askForKey);
  dialog.addEventListener('close', () => {
    if (dialog.returnValue === 'save' && $('#key-input').value.trim()) {
      sessionStorage.setItem(KEY_STORAGE, $('#key-input').value.trim());
      route();
    } else if (dialog.returnValue === 'forget') {
      sessionStorage.removeItem(KEY_STORAGE);
      route();
    }
    showKeyState();
  });
  showKeyState();
}

function showKeyState() {
  const has = Boolean(sessionStorage.getItem(KEY_STORAGE));
  $('#key-button').textContent = has ? 'API key ✓' : 'API key';
}

// ---------------------------------------------------------------- markdown, safely

/** Markdown's common subset as DOM nodes: every character of `text` stays text. */
function markdown(text) {
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

// ---------------------------------------------------------------- server-sent events

/** The events of a `text/event-stream` response, read with fetch (EventSource can neither
 * POST nor send an Authorization header). */
async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { event: 'message', data: '', id: null };
      const data = [];
      for (const line of block.split('\n')) {
        if (!line || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event.event = text;
        else if (field === 'data') data.push(text);
        else if (field === 'id') event.id = text;
      }
      if (!data.length) continue;
      event.data = data.join('\n');
      try {
        event.json = JSON.parse(event.data);
      } catch {
        event.json = null;
      }
      yield event;
    }
  }
}

// ---------------------------------------------------------------- routing

let leaveView = () => {};

function setMain(...children) {
  const main = $('#main');
  main.replaceChildren(...children);
  return main;
}

/** Marks a view as rendered: tests wait for it, and the load time is measured from it. */
function ready(view) {
  document.body.dataset.view = view;
  performance.mark(`console-ready:${view}`);
}

/** Goes to `hash`, rendering again when the page is already there. */
function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function route() {
  leaveView();
  leaveView = () => {};
  $('#errors').replaceChildren();
  delete document.body.dataset.view;
  const [path, query] = (location.hash || '#/sessions').slice(1).split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || '');
  for (const link of document.querySelectorAll('[data-nav]')) {
    if (link.dataset.nav === parts[0]) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const view =
    parts[0] === 'sessions' && parts[1] ? sessionView(parts[1])
      : parts[0] === 'agents' ? agentsView(parts[1])
        : sessionsView(params);
  view.catch((error) => report(error));
}

// ---------------------------------------------------------------- sessions list

/** `k=v, k2=v2` into pairs; what has no `=` is ignored. */
function parseFilter(text) {
  return text.split(',').map((pair) => pair.split('=')).filter((kv) => kv.length >= 2 && kv[0].trim())
    .map(([key, ...value]) => [key.trim(), value.join('=').trim()]);
}

async function sessionsView(params) {
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

function metadataChips(metadata) {
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

// ---------------------------------------------------------------- one session

async function sessionView(id) {
  const state = { id, items: [], earlier: null, agents: [], run: null, stream: null };
  leaveView = () => state.stream && state.stream.abort();

  const header = h('div', { class: 'session-head' });
  const log = h('div', { class: 'log', id: 'log' });
  const earlier = h('button', { type: 'button', id: 'load-earlier', hidden: true }, 'Load earlier');
  const live = h('div', { id: 'live', class: 'live', 'aria-live': 'polite' });
  const runs = h('ol', { class: 'runs', id: 'runs' });
  const stateView = h('pre', { class: 'state', id: 'session-state' });
  const ownerStates = h('div', { id: 'owner-states' });
  const checkpoints = h('ol', { class: 'checkpoints', id: 'checkpoints' });
  const composer = h('div');
  setMain(header,
    h('div', { class: 'session' },
      h('section', { class: 'chat', 'aria-label': 'Conversation' }, earlier, log, live, composer),
      h('aside', { class: 'side', 'aria-label': 'Runs' },
        h('div', { class: 'row spread' }, h('h2', {}, 'Runs'),
          h('button', { type: 'button', class: 'quiet small', onclick: () => loadRuns().catch(report) }, 'Refresh')),
        runs,
        h('h2', {}, 'State'),
        stateView,
        ownerStates,
        h('h2', {}, 'Checkpoints'),
        checkpoints)));

  const loadSession = async () => {
    // The session, its state document with its user's and app's, and its newest
    // checkpoints: all read-only here.
    const [session, stored, saved] = await Promise.all([
      api('GET', sessionPath(id)),
      api('GET', `${sessionPath(id)}/state?include=user,app`),
      api('GET', `${sessionPath(id)}/checkpoints?limit=${CHECKPOINTS_SHOWN}`),
    ]);
    state.session = session;
    header.replaceChildren(sessionHeader(session, state, reloadAll));
    stateView.textContent = JSON.stringify(stored.state, null, 2);
    ownerStates.replaceChildren(...ownerStateViews(session, stored));
    checkpoints.replaceChildren(...saved.data.map(checkpointView));
    if (!saved.data.length) checkpoints.append(h('li', { class: 'muted small' }, 'None'));
  };
  const loadItems = async () => {
    const page = await api('GET', `${sessionPath(id)}/items?order=desc&limit=${ITEMS_PAGE}`);
    state.items = page.data.reverse();
    state.earlier = page.has_more ? page.last_id : null;
    renderLog();
  };
  const loadEarlier = async () => {
    const first = log.firstElementChild;
    const page = await api('GET', `${sessionPath(id)}/items?order=desc&limit=${ITEMS_PAGE}&after=${enc(state.earlier)}`);
    state.items = page.data.reverse().concat(state.items);
    state.earlier = page.has_more ? page.last_id : null;
    renderLog();
    if (first) first.scrollIntoView({ block: 'start' });
  };
  const renderLog = () => {
    log.replaceChildren(...itemViews(state.items, state, reloadAll));
    earlier.hidden = !state.earlier;
  };
  const loadRuns = async () => {
    const page = await api('GET', `${sessionPath(id)}/runs?limit=20`);
    runs.replaceChildren(...page.data.map((run) => runView(run, state)));
    if (!page.data.length) runs.append(h('li', { class: 'muted' }, 'No runs yet.'));
    return page.data;
  };
  const reloadAll = async () => {
    await Promise.all([loadSession(), loadItems(), loadRuns()]);
  };
  earlier.addEventListener('click', act(earlier, loadEarlier));

  state.reloadAll = reloadAll;
  state.live = live;
  // Everything the view shows is asked for at once: the load time is one round trip.
  const [agents, exists, recent] = await Promise.all([
    api('GET', '/v1/agents?limit=100').then((page) => page.data, () => []),
    Promise.all([loadSession(), loadItems()]).then(() => true, (error) => {
      if (error.code !== 'session_not_found') throw error;
      return false;
    }),
    loadRuns().catch((error) => {
      if (error.code !== 'session_not_found') report(error);
      return [];
    }),
  ]);
  if (!exists) {
    header.replaceChildren(h('h1', { id: 'session-title' }, id));
    log.append(h('p', { class: 'muted' }, 'This session does not exist yet; a first message or run creates it.'));
  }
  state.agents = agents;
  composer.replaceChildren(composerView(state));
  ready('session');
  log.lastElementChild?.scrollIntoView({ block: 'end' });
  // Pick up where a previous visit left off: a pending tool call, a run still going.
  const active = recent.find((run) => ['queued', 'running', 'requires_action'].includes(run.status));
  if (active && active.status === 'requires_action') pauseForm(active, state);
  else if (active) follow(state, () => api('GET', `${sessionPath(id)}/runs/${active.id}/events`, undefined, { raw: true, signal: state.stream.signal }));
}

// The documents a session's user and app share, under their owners' names.
function ownerStateViews(session, stored) {
  const views = [];
  if (session.user_id) {
    views.push(h('h3', {}, `User ${session.user_id}`),
      h('pre', { class: 'state', id: 'user-state' }, JSON.stringify(stored.user_state, null, 2)));
  }
  if (session.app_id) {
    views.push(h('h3', {}, `App ${session.app_id}`),
      h('pre', { class: 'state', id: 'app-state' }, JSON.stringify(stored.app_state, null, 2)));
  }
  return views;
}

// One checkpoint: its id, namespace and parent, its metadata, and how many channel
// values and pending writes it holds (their bytes are the framework's own).
function checkpointView(checkpoint) {
  const where = checkpoint.namespace ? ` in ${checkpoint.namespace}` : '';
  const parent = checkpoint.parent_id ? ` after ${checkpoint.parent_id}` : '';
  return h('li', { class: 'checkpoint' },
    h('div', { class: 'small' }, h('code', {}, checkpoint.id), where, parent),
    h('div', { class: 'muted small' },
      `${checkpoint.blobs.length} channels · ${checkpoint.writes.length} pending writes · ${when(checkpoint.created_at)}`),
    h('pre', { class: 'state small' }, JSON.stringify(checkpoint.metadata)));
}

function sessionHeader(session, state, reloadAll) {
  const usage = session.usage || {};
  const actions = h('div', { class: 'row actions' });
  const panel = h('div', { id: 'action-panel' });
  const button = (label, id, onclick, cls) => {
    const b = h('button', { type: 'button', id, class: cls });
    b.textContent = label;
    b.addEventListener('click', act(b, onclick, panel));
    actions.append(b);
  };
  button('Edit metadata', 'edit-metadata', async () => panel.replaceChildren(metadataEditor(session, state, reloadAll)));
  button('Compact', 'compact', async () => {
    const compaction = await api('POST', `${sessionPath(session.id)}/compact`, {});
    panel.replaceChildren(h('p', { class: 'note' }, `Compacted ${compaction.items_compacted} items through #${compaction.through_seq}.`));
    await reloadAll();
  });
  button('Clear', 'clear-session', async () => {
    if (!(await confirmAction(`Delete every item of session “${session.id}”? The session and its runs stay.`, 'Clear items'))) return;
    await api('DELETE', `${sessionPath(session.id)}/items`);
    await reloadAll();
  }, 'danger');
  button('Delete session', 'delete-session', async () => {
    if (!(await confirmAction(`Delete session “${session.id}” with all its items and runs?`, 'Delete session'))) return;
    await api('DELETE', sessionPath(session.id));
    location.hash = '#/sessions';
  }, 'danger');
  const forked = session.forked_from
    ? h('p', { class: 'small', id: 'forked-from' }, 'Forked from ',
      h('a', { href: `#/sessions/${enc(session.forked_from.session_id)}` }, session.forked_from.session_id),
      session.forked_from.item_id ? ` at item ${session.forked_from.item_id}` : '')
    : null;
  return h('div', {},
    h('p', { class: 'small' }, h('a', { href: '#/sessions' }, '← Sessions')),
    h('h1', { id: 'session-title' }, session.id),
    forked,
    h('p', { class: 'muted small' },
      `${session.item_count} items · revision ${session.revision} · ${usage.total_tokens || 0} tokens in ${usage.llm_calls || 0} LLM calls · created ${when(session.created_at)}`,
      session.agent_id ? ` · agent ${session.agent_id}` : '',
      session.app_id ? ` · app ${session.app_id}` : '',
      session.user_id ? ` · user ${session.user_id}` : ''),
    metadataChips(session.metadata),
    actions, panel);
}

function metadataEditor(session, state, reloadAll) {
  const text = h('textarea', { id: 'metadata-json', rows: 6, class: 'mono', value: json(session.metadata || {}) });
  const agent = h('select', { id: 'metadata-agent' }, agentOptions(state.agents, session.agent_id, 'no agent'));
  const errors = h('div');
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save');
  const form = h('form', { class: 'stack panel' },
    h('label', { for: 'metadata-json' }, 'Metadata (JSON merge patch: a key set to null is deleted)'), text,
    h('label', { for: 'metadata-agent' }, 'Agent'), agent,
    h('div', { class: 'row' }, save, h('button', { type: 'button', onclick: () => form.remove() }, 'Close')),
    errors);
  form.addEventListener('submit', act(save, async () => {
    let metadata;
    try {
      metadata = JSON.parse(text.value);
    } catch (error) {
      throw new ApiError(0, { code: 'not_json', detail: `the metadata is not JSON: ${error.message}` });
    }
    const body = { metadata };
    if ((agent.value || null) !== (session.agent_id || null)) body.agent_id = agent.value || null;
    await api('PATCH', sessionPath(session.id), body);
    await reloadAll();
  }, errors));
  return form;
}

function agentOptions(agents, selected, none) {
  return [h('option', { value: '' }, none)].concat(agents.map((agent) => h('option',
    { value: agent.id, selected: agent.id === selected }, agent.name ? `${agent.name} (${agent.id})` : agent.id)));
}

// ---------------------------------------------------------------- items as a chat

function textOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  return content.map((part) => (part && typeof part.text === 'string' ? part.text : `[${(part && part.type) || 'part'}]`)).join('\n');
}

const isMessage = (body) => typeof body.role === 'string' && (body.type === undefined || body.type === 'message');

/** The history as bubbles; a function call and its output fold into one block. */
function itemViews(items, state, reloadAll) {
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

function prettyArguments(text) {
  try {
    return json(JSON.parse(text));
  } catch {
    return String(text ?? '');
  }
}

// ---------------------------------------------------------------- running a turn

function composerView(state) {
  const input = h('textarea', { id: 'composer-input', rows: 3, placeholder: 'Message (Ctrl+Enter runs the turn)' });
  const agent = h('select', { id: 'composer-agent' }, agentOptions(state.agents, null, "session's agent / default"));
  const model = h('input', { id: 'composer-model', placeholder: 'inline model (optional)' });
  const send = h('button', { type: 'submit', class: 'primary', id: 'send' }, 'Run turn');
  const cancel = h('button', { type: 'button', id: 'cancel-run', class: 'danger', hidden: true }, 'Cancel run');
  const form = h('form', { class: 'composer', 'aria-label': 'Run a turn' },
    h('label', { for: 'composer-input', class: 'sr-only' }, 'Message'), input,
    h('div', { class: 'row' },
      h('label', { for: 'composer-agent' }, 'Agent'), agent,
      h('label', { for: 'composer-model', class: 'sr-only' }, 'Model'), model,
      send, cancel));
  state.sending = (busy) => {
    send.disabled = busy;
    cancel.hidden = !busy;
  };
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!input.value.trim()) return;
    const body = { input: input.value, stream: true };
    if (agent.value) body.agent_id = agent.value;
    if (model.value.trim()) body.agent = { model: model.value.trim() };
    follow(state, () => api('POST', `${sessionPath(state.id)}/runs`, body, { raw: true, signal: state.stream.signal }))
      .then((ok) => ok && (input.value = ''));
  });
  cancel.addEventListener('click', act(cancel, async () => {
    if (state.run) await api('POST', `${sessionPath(state.id)}/runs/${state.run.id}/cancel`);
  }, state.live));
  return form;
}

/** Follows a run's event stream into the live area: tokens as they come, tool calls as
 * they happen, the tool-output form when the run waits for the client. */
async function follow(state, open) {
  const live = state.live;
  state.stream = new AbortController();
  state.sending(true);
  live.replaceChildren();
  const status = h('p', { class: 'small muted', id: 'run-status' }, 'Starting run…');
  live.append(status);
  let bubble = null;
  let text = '';
  let ended = null;
  try {
    const response = await open();
    for await (const event of events(response)) {
      const data = event.json || {};
      if (event.event.startsWith('run.')) {
        state.run = data;
        status.textContent = `Run ${data.id}: ${data.status}`;
        status.dataset.status = data.status;
      }
      if (event.event === 'message.delta') {
        if (!bubble) {
          text = '';
          bubble = h('div', { class: 'text streaming', id: 'streaming-text' });
          live.append(h('article', { class: 'item message assistant' },
            h('div', { class: 'bubble' }, h('span', { class: 'role' }, 'assistant'), bubble)));
        }
        text += data.delta || '';
        bubble.textContent = text;
      } else if (event.event === 'item.created') {
        const item = data.item || {};
        if (item.type === 'function_call') {
          live.append(h('p', { class: 'tool-event' }, `tool call ${item.name}(${item.arguments || ''})`));
        } else if (item.type === 'function_call_output') {
          live.append(h('p', { class: 'tool-event' }, `tool output ${item.call_id}: ${item.output}`));
        } else if (item.type === 'mcp_call') {
          const answer = typeof item.error === 'string' ? `error ${item.error}` : item.output;
          live.append(h('p', { class: 'tool-event' }, `tool call ${item.server_label}.${item.name}(${item.arguments || ''}): ${answer}`));
        } else if (bubble && isMessage(item)) {
          bubble.replaceChildren(markdown(textOf(item.content) || text));
          bubble.classList.remove('streaming');
          bubble = null;
        }
      } else if (['run.requires_action', 'run.completed', 'run.failed', 'run.cancelled', 'run.interrupted'].includes(event.event)) {
        ended = data;
      }
    }
  } catch (error) {
    report(error, live);
    return false;
  } finally {
    state.sending(false);
  }
  if (!ended) return true;
  if (ended.status === 'requires_action') {
    pauseForm(ended, state);
    await state.reloadAll().catch(report);
    return true;
  }
  await state.reloadAll().catch(report);
  live.replaceChildren();
  if (ended.status === 'failed') {
    live.append(runErrorView(ended));
  } else if (ended.status === 'cancelled') {
    live.append(h('p', { class: 'note', id: 'run-cancelled' }, `Run ${ended.id} was cancelled; the history is unchanged.`));
  } else if (ended.status === 'interrupted') {
    live.append(h('p', { class: 'note', id: 'run-interrupted' }, `Run ${ended.id} was interrupted; what it finished is in the history.`));
  }
  return true;
}

function runErrorView(run) {
  const error = run.error || {};
  return h('div', { class: 'problem run-error', dataset: { code: error.code || '' } },
    h('p', {}, h('strong', { class: 'code' }, `Run failed: ${error.code || 'unknown'}`), ' ', error.message || ''),
    h('p', { class: 'small muted' }, `run ${run.id}`));
}

/** The client's tools: the run waits until each call has an output. */
// A paused run waits for the client's tool outputs or for a person's approvals.
function pauseForm(run, state) {
  if (run.required_action && run.required_action.type === 'approve_tool_calls') approvalsForm(run, state);
  else toolOutputsForm(run, state);
}

function approvalsForm(run, state) {
  const calls = run.required_action.tool_calls || [];
  const decisions = calls.map(() => null);
  const submit = h('button', { type: 'submit', class: 'primary', id: 'submit-approvals', disabled: true }, 'Send decisions');
  const fields = calls.map((call, n) => {
    const reason = h('input', { id: `reject-reason-${n}`, type: 'text', placeholder: 'Why (the model reads it)' });
    const approve = h('button', { type: 'button', id: `approve-${n}`, 'aria-pressed': 'false' }, 'Approve');
    const reject = h('button', { type: 'button', id: `reject-${n}`, class: 'danger', 'aria-pressed': 'false' }, 'Reject');
    const decide = (approved) => {
      decisions[n] = approved;
      approve.setAttribute('aria-pressed', String(approved));
      reject.setAttribute('aria-pressed', String(!approved));
      submit.disabled = decisions.includes(null);
    };
    approve.addEventListener('click', () => decide(true));
    reject.addEventListener('click', () => decide(false));
    return { call, reason, view: h('fieldset', { class: 'approval', dataset: { callId: call.call_id } },
      h('legend', {}, `${call.name} (${call.call_id})`),
      h('pre', { class: 'mono' }, prettyArguments(call.arguments)),
      h('div', { class: 'row' }, approve, reject),
      h('label', { for: `reject-reason-${n}` }, 'Reason, if rejected'), reason) };
  });
  const form = h('form', { class: 'stack panel', id: 'approvals', 'aria-label': 'Approvals' },
    h('p', {}, h('strong', {}, 'The run waits for your approval.'), ` Run ${run.id} wants to call:`),
    fields.map((field) => field.view), h('div', { class: 'row' }, submit));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const approvals = fields.map(({ call, reason }, n) => (decisions[n]
      ? { call_id: call.call_id, approve: true }
      : { call_id: call.call_id, approve: false, reason: reason.value || undefined }));
    const body = { approvals, stream: true };
    follow(state, () => api('POST', `${sessionPath(state.id)}/runs/${run.id}/approvals`, body, { raw: true, signal: state.stream.signal }));
  });
  state.live.replaceChildren(form);
}

function toolOutputsForm(run, state) {
  const calls = (run.required_action && run.required_action.tool_calls) || [];
  const errors = h('div');
  const submit = h('button', { type: 'submit', class: 'primary', id: 'submit-tool-outputs' }, 'Submit tool outputs');
  const fields = calls.map((call, n) => {
    const output = h('textarea', { id: `tool-output-${n}`, rows: 2, class: 'mono', dataset: { callId: call.call_id } });
    return { call, output, view: h('fieldset', {},
      h('legend', {}, `${call.name} (${call.call_id})`),
      h('pre', { class: 'mono' }, prettyArguments(call.arguments)),
      h('label', { for: `tool-output-${n}` }, `Output of ${call.name}`), output) };
  });
  const form = h('form', { class: 'stack panel', id: 'tool-outputs', 'aria-label': 'Tool outputs' },
    h('p', {}, h('strong', {}, 'The run waits for your tools.'), ` Run ${run.id} called:`),
    fields.map((field) => field.view), h('div', { class: 'row' }, submit), errors);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const body = { outputs: fields.map(({ call, output }) => ({ call_id: call.call_id, output: output.value })), stream: true };
    follow(state, () => api('POST', `${sessionPath(state.id)}/runs/${run.id}/tool_outputs`, body, { raw: true, signal: state.stream.signal }));
  });
  state.live.replaceChildren(form);
  if (fields.length) fields[0].output.focus();
}

// ---------------------------------------------------------------- runs

function duration(run) {
  if (!run.started_at) return '';
  const end = run.finished_at ? new Date(run.finished_at) : new Date();
  return ` · ${((end - new Date(run.started_at)) / 1000).toFixed(2)} s`;
}

function runView(run, state) {
  const usage = run.usage || {};
  const eventsBox = h('div');
  const showEvents = h('button', { type: 'button', class: 'quiet small' }, 'Raw events');
  showEvents.addEventListener('click', act(showEvents, async () => {
    const pre = h('pre', { class: 'mono events' });
    eventsBox.replaceChildren(pre);
    const response = await api('GET', `${sessionPath(state.id)}/runs/${run.id}/events`, undefined, { raw: true });
    for await (const event of events(response)) {
      pre.append(`id: ${event.id}\nevent: ${event.event}\ndata: ${event.json ? json(event.json) : event.data}\n\n`);
    }
  }, eventsBox));
  const active = ['queued', 'running', 'requires_action'].includes(run.status);
  const cancel = active ? h('button', { type: 'button', class: 'small danger' }, 'Cancel') : null;
  if (cancel) {
    cancel.addEventListener('click', act(cancel, async () => {
      await api('POST', `${sessionPath(state.id)}/runs/${run.id}/cancel`);
      await state.reloadAll();
    }, eventsBox));
  }
  return h('li', { class: `run ${run.status}`, dataset: { runId: run.id, status: run.status } },
    h('p', {}, h('span', { class: `badge ${run.status}` }, run.status), ' ', h('span', { class: 'small muted' }, when(run.created_at), duration(run))),
    run.error ? h('p', { class: 'run-error-code' }, h('strong', {}, run.error.code), ' ', run.error.message || '') : null,
    run.incomplete_details ? h('p', { class: 'small' }, `incomplete: ${run.incomplete_details.reason}`) : null,
    h('p', { class: 'small muted' },
      `${run.model || 'default model'} · ${usage.input_tokens || 0} in / ${usage.output_tokens || 0} out tokens · ${usage.llm_calls || 0} LLM calls`),
    h('div', { class: 'row' }, showEvents, cancel),
    eventsBox);
}

// ---------------------------------------------------------------- agents

const AGENT_TEMPLATE = {
  name: 'helper',
  instructions: 'You are a helpful assistant.',
  tools: [],
};

async function agentsView(selected) {
  const list = h('ul', { class: 'cards', id: 'agents' });
  const editor = h('div', { id: 'agent-editor' });
  setMain(
    h('div', { class: 'row spread' }, h('h1', {}, 'Agents'),
      h('a', { href: '#/agents/new', class: 'button', id: 'new-agent' }, 'New agent')),
    h('div', { class: 'agents' }, list, editor));
  const page = await api('GET', '/v1/agents?limit=100');
  if (!page.data.length) list.append(h('li', { class: 'muted' }, 'No agents yet.'));
  for (const agent of page.data) {
    const remove = h('button', { type: 'button', class: 'quiet small danger' }, 'Delete');
    remove.addEventListener('click', act(remove, async () => {
      if (!(await confirmAction(`Delete agent “${agent.name || agent.id}”?`, 'Delete agent'))) return;
      await api('DELETE', `/v1/agents/${enc(agent.id)}`);
      navigate('#/agents');
    }));
    list.append(h('li', { class: 'card', dataset: { agentId: agent.id } },
      h('a', { href: `#/agents/${enc(agent.id)}` }, agent.name || agent.id),
      h('span', { class: 'muted small' },
        `${agent.model || 'default model'} · ${(agent.tools || []).length} tools · ${agent.id}`),
      h('div', {}, remove)));
  }
  if (selected === 'new') editor.append(agentEditor(null));
  else if (selected) editor.append(agentEditor(await api('GET', `/v1/agents/${enc(selected)}`)));
  ready('agents');
}

function agentEditor(agent) {
  const editable = agent ? { ...agent } : AGENT_TEMPLATE;
  for (const field of ['id', 'created_at', 'updated_at']) delete editable[field];
  const text = h('textarea', { id: 'agent-json', class: 'mono', rows: 18, spellcheck: 'false',
    'aria-describedby': 'agent-errors', value: json(editable) });
  const errors = h('div', { id: 'agent-errors' });
  const save = h('button', { type: 'submit', class: 'primary', id: 'save-agent' }, agent ? 'Save changes' : 'Create agent');
  const form = h('form', { class: 'stack panel' },
    h('h2', {}, agent ? `Edit ${agent.name || agent.id}` : 'New agent'),
    h('label', { for: 'agent-json' }, agent ? 'Agent (JSON; sent as a PATCH)' : 'Agent (JSON)'),
    text, h('div', { class: 'row' }, save, h('a', { href: '#/agents' }, 'Close')), errors);
  form.addEventListener('submit', act(save, async () => {
    let body;
    try {
      body = JSON.parse(text.value);
    } catch (error) {
      throw new ApiError(0, { code: 'not_json', detail: `the agent is not JSON: ${error.message}` });
    }
    const saved = agent
      ? await api('PATCH', `/v1/agents/${enc(agent.id)}`, body)
      : await api('POST', '/v1/agents', body);
    errors.replaceChildren(h('p', { class: 'note' }, `Saved agent ${saved.id}.`));
    if (!agent) location.hash = `#/agents/${enc(saved.id)}`;
  }, errors));
  return form;
}

// ---------------------------------------------------------------- start

setUpKeyDialog();
window.addEventListener('hashchange', route);
route();
