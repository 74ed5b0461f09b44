// The API as the console calls it, and its errors as people read them.

import { askForKey, KEY_STORAGE } from './dialogs.js';
import { $, h } from './dom.js';

/** A problem document from the API (or a network failure), with what a person needs. */
export class ApiError extends Error {
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

/** What a person typed as JSON, parsed; refused as `not_json` naming `what` otherwise. */
export function parsedJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ApiError(0, { code: 'not_json', detail: `${what} is not JSON: ${error.message}` });
  }
}

/** Calls the API; resolves to the parsed body (or the response itself with `raw`). */
export async function api(method, path, body, { raw = false, signal } = {}) {
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
export function report(error, where) {
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
export function act(button, action, where) {
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
