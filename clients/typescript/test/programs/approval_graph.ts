/**
 * A LangGraph.js graph that stops for a person's approval (`interrupt()`), its
 * checkpoints in the service: `node approval_graph.js <service url> <thread> start`
 * runs it to the interrupt, `… resume <answer>` goes on from there, in another process.
 * Prints what the graph gave back, as JSON, on its last line.
 */

import { Annotation, Command, END, START, StateGraph, interrupt } from '@langchain/langgraph';

import { AgentSessionsSaver } from '../../src/index.js';

const State = Annotation.Root({
  request: Annotation<string>(),
  steps: Annotation<string[]>({ reducer: (all, more) => all.concat(more), default: () => [] }),
  decision: Annotation<string>(),
});

const graph = new StateGraph(State)
  .addNode('draft', (state) => ({ steps: [`drafted a refund for ${state.request}`] }))
  .addNode('approve', () => {
    const decision = interrupt({ question: 'Send the refund?' }) as string;
    return { decision, steps: [`a person said ${decision}`] };
  })
  .addNode('send', (state) => ({ steps: [state.decision === 'yes' ? 'sent' : 'dropped'] }))
  .addEdge(START, 'draft')
  .addEdge('draft', 'approve')
  .addEdge('approve', 'send')
  .addEdge('send', END);

const [baseUrl, threadId, mode, answer] = process.argv.slice(2);
const app = graph.compile({ checkpointer: new AgentSessionsSaver({ baseUrl }) });
const config = { configurable: { thread_id: threadId } };
const result =
  mode === 'start'
    ? await app.invoke({ request: 'order 4711' }, config)
    : await app.invoke(new Command({ resume: answer }), config);
const snapshot = await app.getState(config);
console.log(JSON.stringify({ result, next: snapshot.next }));
