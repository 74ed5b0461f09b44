// Server-sent events, for following runs.

/** The events of a `text/event-stream` response, read with fetch (EventSource can neither
 * POST nor send an Authorization header). */
export async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { event: 'message', data: '', id: null };
      const data = [];
      for (const line of block.split('\n')) {
        if (!line || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event.event = text;
        else if (field === 'data') data.push(text);
        else if (field === 'id') event.id = text;
      }
      if (!data.length) continue;
      event.data = data.join('\n');
      try {
        event.json = JSON.parse(event.data);
      } catch {
        event.json = null;
      }
      yield event;
    }
  }
}
