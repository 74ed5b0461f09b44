// A session's runs: status, timing, usage, raw events, and cancelling one.

import { act, api } from '../api.js';
import { h, json, sessionPath, when } from '../dom.js';
import { events } from '../events.js';

function duration(run) {
  if (!run.started_at) return '';
  const end = run.finished_at ? new Date(run.finished_at) : new Date();
  return ` · ${((end - new Date(run.started_at)) / 1000).toFixed(2)} s`;
}

export function runView(run, state) {
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
