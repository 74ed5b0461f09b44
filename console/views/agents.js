// Agents: the list, and an editor of one as JSON.

import { act, api, parsedJson } from '../api.js';
import { confirmAction } from '../dialogs.js';
import { enc, h, json } from '../dom.js';
import { navigate, ready, setMain } from '../page.js';

const AGENT_TEMPLATE = {
  name: 'helper',
  instructions: 'You are a helpful assistant.',
  tools: [],
};

export async function agentsView(selected) {
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
    const body = parsedJson(text.value, 'the agent');
    const saved = agent
      ? await api('PATCH', `/v1/agents/${enc(agent.id)}`, body)
      : await api('POST', '/v1/agents', body);
    errors.replaceChildren(h('p', { class: 'note' }, `Saved agent ${saved.id}.`));
    if (!agent) location.hash = `#/agents/${enc(saved.id)}`;
  }, errors));
  return form;
}

export function agentOptions(agents, selected, none) {
  return [h('option', { value: '' }, none)].concat(agents.map((agent) => h('option',
    { value: agent.id, selected: agent.id === selected }, agent.name ? `${agent.name} (${agent.id})` : agent.id)));
}
