// Where the service is and which chat this page shows, from the page's address:
//   ?api=http://localhost:8080   the service (default: VITE_AGENT_SESSIONS_URL, else localhost:8080)
//   ?chat=<id>                   the chat, which is a session (default: a new id, put in the address)
//   ?agent=<id>                  the agent its turns run with (default: the session's)
const query = new URLSearchParams(window.location.search);

function chatId() {
  const given = query.get("chat");
  if (given) return given;
  const made = `chat-${crypto.randomUUID()}`;
  query.set("chat", made);
  // The id stays in the address, so a reload opens the same chat.
  window.history.replaceState(null, "", `?${query}`);
  return made;
}

export const settings = {
  api: (query.get("api") ?? import.meta.env.VITE_AGENT_SESSIONS_URL ?? "http://localhost:8080")
    .replace(/\/$/, ""),
  chatId: chatId(),
  agentId: query.get("agent"),
};

/** The chat's messages as the service keeps them; none for a chat not started yet. */
export async function loadMessages() {
  const url = `${settings.api}/v1/chat/${encodeURIComponent(settings.chatId)}/messages`;
  const response = await fetch(url);
  if (response.status === 404) return [];
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  return (await response.json()).data;
}
