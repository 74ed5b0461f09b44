// What every part of the console builds pages with.
//
// Safety rule of the console: stored data (items, metadata, run errors, agent fields) only
// ever reaches the page as text — through `h()` (which appends text nodes) or
// `textContent`. Nothing assigns `innerHTML`; the Content-Security-Policy the server
// sends forbids inline script as a second line of defence.

export const $ = (selector, root = document) => root.querySelector(selector);

/** An element with properties and children; strings become text nodes, never markup. */
export function h(tag, props, ...children) {
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

export const enc = encodeURIComponent;
export const sessionPath = (id) => `/v1/sessions/${enc(id)}`;
// One formatter for the page: `toLocaleString()` builds a new one per call, which made
// rendering 100 items take longer than fetching them.
const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });
export const when = (ts) => (ts ? DATE_TIME.format(new Date(ts)) : '—');
export const json = (value) => JSON.stringify(value, null, 2);
