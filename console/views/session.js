// One session: its history as a chat, its runs, its state documents and checkpoints, and
// what can be done to it.

import { act, api, parsedJson, report } from '../api.js';
import { confirmAction } from '../dialogs.js';
import { enc, h, json, sessionPath, when } from '../dom.js';
import { onLeave, ready, setMain } from '../page.js';
import { agentOptions } from './agents.js';
import { itemViews } from './items.js';
import { runView } from './runs.js';
import { metadataChips } from './sessions.js';
import { composerView, follow, pauseForm } from './turn.js';

const ITEMS_PAGE = 100;
// The newest checkpoints a session's page shows.
const CHECKPOINTS_SHOWN = 20;

export async function sessionView(id) {
  const state = { id, items: [], earlier: null, agents: [], run: null, stream: null };
  onLeave(() => state.stream && state.stream.abort());

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
    const body = { metadata: parsedJson(text.value, 'the metadata') };
    if ((agent.value || null) !== (session.agent_id || null)) body.agent_id = agent.value || null;
    await api('PATCH', sessionPath(session.id), body);
    await reloadAll();
  }, errors));
  return form;
}
