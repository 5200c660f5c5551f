// An official TypeScript MCP client as the agent in agent-harness's end-to-end tests.
//
//   node ts-client.mjs --sdk v1|v2 [--modern] (--url URL | --stdio CMD ARG...) < plan.json
//
// v1 is @modelcontextprotocol/sdk (2025 revisions), v2 is @modelcontextprotocol/client (its
// --modern mode pins 2026-07-28: server/discover, _meta on every request, no session). The plan
// on stdin is a JSON list of tool calls ({"name", "arguments"}); the client lists the tools,
// makes the calls in order, and prints one JSON object: the protocol version, the tool names
// and each call's result (or the error it raised).
const argv = process.argv.slice(2);
const take = (flag) => {
  const at = argv.indexOf(flag);
  return at < 0 ? undefined : argv[at + 1];
};
const sdk = take('--sdk') ?? 'v1';
const modern = argv.includes('--modern');
const url = take('--url');
const stdioAt = argv.indexOf('--stdio');

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const plan = JSON.parse(Buffer.concat(chunks).toString() || '[]');

let Client, Http, Stdio;
if (sdk === 'v2') {
  ({ Client, StreamableHTTPClientTransport: Http } = await import('@modelcontextprotocol/client'));
  ({ StdioClientTransport: Stdio } = await import('@modelcontextprotocol/client/stdio'));
} else {
  ({ Client } = await import('@modelcontextprotocol/sdk/client/index.js'));
  ({ StreamableHTTPClientTransport: Http } = await import(
    '@modelcontextprotocol/sdk/client/streamableHttp.js'
  ));
  ({ StdioClientTransport: Stdio } = await import('@modelcontextprotocol/sdk/client/stdio.js'));
}

const options = modern ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {};
const client = new Client({ name: 'agent-harness-e2e-ts', version: '1.0.0' }, options);
const transport =
  url !== undefined
    ? new Http(new URL(url))
    : new Stdio({ command: argv[stdioAt + 1], args: argv.slice(stdioAt + 2), stderr: 'inherit' });
await client.connect(transport);
const version = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
const out = { protocolVersion: version ?? null, calls: [] };
out.tools = (await client.listTools()).tools.map((tool) => tool.name);
for (const call of plan) {
  try {
    out.calls.push({ result: await client.callTool(call) });
  } catch (error) {
    out.calls.push({ error: String(error?.message ?? error) });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
