import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { useState } from "react";

import { settings } from "./service.js";

// The one option the service needs: where /v1/chat is. An agent, if the page names one,
// goes in the body of each request.
const transport = new DefaultChatTransport({
  api: `${settings.api}/v1/chat`,
  body: settings.agentId ? { agent_id: settings.agentId } : undefined,
});

// A tool the page runs itself: the model's call pauses the run until its output is sent.
const clientTools = {
  get_local_time: () => ({ time: new Date().toISOString(), zone: Intl.DateTimeFormat().resolvedOptions().timeZone }),
};

function waitsForDecision(messages) {
  const last = messages[messages.length - 1];
  return last?.role === "assistant" && last.parts.some((part) => part.state === "approval-requested");
}

export function Chat({ id, initialMessages }) {
  const { messages, sendMessage, status, error, addToolOutput, addToolApprovalResponse } = useChat({
    id,
    messages: initialMessages,
    transport,
    // Reattach to a turn still streaming when the page loads.
    resume: true,
    // Once every call of the step is answered: the page's tools by their outputs, the
    // service's by a person's decision. A run waits for decisions first.
    sendAutomaticallyWhen: (options) =>
      !waitsForDecision(options.messages) &&
      (lastAssistantMessageIsCompleteWithToolCalls(options) ||
        lastAssistantMessageIsCompleteWithApprovalResponses(options)),
    onToolCall: ({ toolCall }) => {
      const run = clientTools[toolCall.toolName];
      if (!run) return;
      // Not awaited: useChat sends the output once every call of the step has one.
      addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: run(toolCall.input) });
    },
  });
  const [draft, setDraft] = useState("");
  const busy = status === "submitted" || status === "streaming";

  const send = (event) => {
    event.preventDefault();
    if (!draft.trim() || busy) return;
    sendMessage({ text: draft });
    setDraft("");
  };

  return (
    <main>
      <h1>Chat <code>{id}</code></h1>
      <ol className="messages" aria-live="polite">
        {messages.map((message) => (
          <li key={message.id} className={`message ${message.role}`} data-role={message.role}>
            {message.parts.map((part, i) => (
              <Part key={i} part={part} approve={addToolApprovalResponse} />
            ))}
          </li>
        ))}
      </ol>
      {error && <p role="alert" className="error">{error.message}</p>}
      <form onSubmit={send}>
        <input
          aria-label="Message"
          value={draft}
          onChange={(event) => setDraft(event.target.value)}
          placeholder="Say something"
        />
        <button type="submit" disabled={busy}>Send</button>
      </form>
      <p className="status" data-status={status}>{status}</p>
    </main>
  );
}

function Part({ part, approve }) {
  if (part.type === "text") return <p className="text">{part.text}</p>;
  const tool = part.type === "dynamic-tool" ? part.toolName : part.type.startsWith("tool-") && part.type.slice(5);
  if (!tool) return null;
  return (
    <details className="tool" data-tool={tool} data-state={part.state}>
      <summary>
        Tool <code>{tool}</code> <span className="state">{part.state}</span>
      </summary>
      <pre>{JSON.stringify(part.input, null, 2)}</pre>
      {"output" in part && <pre className="output">{JSON.stringify(part.output, null, 2)}</pre>}
      {part.state === "approval-requested" && (
        <p>
          <button onClick={() => approve({ id: part.approval.id, approved: true })}>Approve</button>{" "}
          <button onClick={() => approve({ id: part.approval.id, approved: false, reason: "rejected in the chat" })}>
            Reject
          </button>
        </p>
      )}
    </details>
  );
}
