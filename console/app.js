// The agent-sessions console: plain DOM in native ES modules, no framework, no build step.
// This module routes the page's address to its views; `dom.js` states the safety rule
// every module keeps.
'use strict';

import { report } from './api.js';
import { setUpKeyDialog } from './dialogs.js';
import { $ } from './dom.js';
import { leave } from './page.js';
import { agentsView } from './views/agents.js';
import { sessionView } from './views/session.js';
import { sessionsView } from './views/sessions.js';

function route() {
  leave();
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

setUpKeyDialog(route);
window.addEventListener('hashchange', route);
route();
