// The conformance suite's reference everything-server over stdio (for H3 with a stdio
// upstream). The server is HTTP only; its createMcpServer() builds the MCP server itself. The
// test copies the part of everything-server.ts before its Express app into server-core.ts
// (exporting createMcpServer) next to this file, in a temporary folder: the third-party file
// itself is never changed or copied into this repository.
//
// stdout carries JSON-RPC only, so the server's console.log lines go to stderr; they are set
// aside before the server's module is loaded.
//
// With CONFORMANCE_WIRE_DIR set, the server keeps its own record of the wire: every byte it
// read from stdin in PID.in and every byte it wrote to stdout in PID.out (the test compares
// them with what the agent sent and received through the proxy).
import { appendFileSync } from 'node:fs';

console.log = (...args: unknown[]) => console.error(...args);

const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
const { createMcpServer } = await import('./server-core.ts');

const wire = process.env.CONFORMANCE_WIRE_DIR;
if (wire) {
  const out = `${wire}/${process.pid}.out`;
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    appendFileSync(out, chunk);
    return write(chunk, ...rest);
  }) as typeof process.stdout.write;
}

const server = createMcpServer();
await server.connect(new StdioServerTransport());
if (wire) {
  // Attached right after the transport's own listener, before any input can arrive (no I/O
  // callback runs between the two), so the record misses nothing.
  process.stdin.on('data', (chunk: Buffer) => appendFileSync(`${wire}/${process.pid}.in`, chunk));
}
