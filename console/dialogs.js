// The page's two dialogs: the confirmation before a destructive action, and the API key.

import { $ } from './dom.js';

// The key lives in this tab's sessionStorage only.
export const KEY_STORAGE = 'agent-sessions.api-key';

/** Asks before a destructive action, in a modal dialog; resolves to true on "confirm". */
export function confirmAction(text, label = 'Confirm') {
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

export function askForKey() {
  const dialog = $('#key-dialog');
  if (dialog.open) return;
  $('#key-input').value = '';
  dialog.showModal();
  $('#key-input').focus();
}

/** Wires the API key button and dialog; `changed` runs when the key is saved or forgotten. */
export function setUpKeyDialog(changed) {
  const dialog = $('#key-dialog');
  $('#key-button').addEventListener('click', askForKey);
  dialog.addEventListener('close', () => {
    if (dialog.returnValue === 'save' && $('#key-input').value.trim()) {
      sessionStorage.setItem(KEY_STORAGE, $('#key-input').value.trim());
      changed();
    } else if (dialog.returnValue === 'forget') {
      sessionStorage.removeItem(KEY_STORAGE);
      changed();
    }
    showKeyState();
  });
  showKeyState();
}

function showKeyState() {
  const has = Boolean(sessionStorage.getItem(KEY_STORAGE));
  $('#key-button').textContent = has ? 'API key ✓' : 'API key';
}
