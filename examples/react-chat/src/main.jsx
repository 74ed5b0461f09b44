import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";

import { Chat } from "./Chat.jsx";
import { loadMessages, settings } from "./service.js";
import "./style.css";

// The chat's history is the service's: it is read once, before useChat starts, so that
// a reloaded page shows every message and then resumes a turn still streaming.
function App() {
  const [initial, setInitial] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    loadMessages().then(setInitial, (e) => setError(String(e)));
  }, []);
  if (error) return <p role="alert">Cannot load the chat: {error}</p>;
  if (!initial) return <p aria-busy="true">Loading…</p>;
  return <Chat id={settings.chatId} initialMessages={initial} />;
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
