// The main area of the page, what the views put in it, and going from one to another.

import { $ } from './dom.js';

let leaveView = () => {};

/** What to do when the page leaves the view now shown (stop following a run). */
export function onLeave(action) {
  leaveView = action;
}

/** Leaves the view now shown. */
export function leave() {
  leaveView();
  leaveView = () => {};
}

export function setMain(...children) {
  const main = $('#main');
  main.replaceChildren(...children);
  return main;
}

/** Marks a view as rendered: tests wait for it, and the load time is measured from it. */
export function ready(view) {
  document.body.dataset.view = view;
  performance.mark(`console-ready:${view}`);
}

/** Goes to `hash`, rendering again when the page is already there. */
export function navigate(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}
