// Running a turn: the composer, the live run as it streams, and the forms of a paused run.

import { act, api, report } from '../api.js';
import { h, sessionPath } from '../dom.js';
import { events } from '../events.js';
import { markdown } from '../markdown.js';
import { agentOptions } from './agents.js';
import { isMessage, prettyArguments, textOf } from './items.js';

export function composerView(state) {
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
export async function follow(state, open) {
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
export function pauseForm(run, state) {
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
