"""An LLM that answers every Chat Completions call at once with the same one-delta stream.

`python3 bench/run_cost/instant_llm.py PORT`: reads each request whole without parsing it,
keeps connections open, and costs next to nothing, so that what a benchmark measures is the
service's work, not the fake's.
"""

import asyncio
import sys

CHUNKS = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"done"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}\n\n'
    b"data: [DONE]\n\n"
)
ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n"
    % len(CHUNKS)
    + CHUNKS
)


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            writer.write(ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(answer, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()


asyncio.run(main())
