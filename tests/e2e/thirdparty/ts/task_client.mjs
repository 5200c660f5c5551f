// The official TypeScript SDK client calling a tool as a task through a command (a proxy).
//
//   node task_client.mjs TOOL ARGS_JSON TIMES -- COMMAND [ARG...]
//
// Calls TOOL TIMES times with client.experimental.tasks.callToolStream (the SDK creates the
// task, polls tasks/get, fetches tasks/result) and prints every message the stream yields as
// one JSON line: {"call": n, "type": ..., ...}. Exit code 0 unless connecting failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const args = process.argv.slice(2);
const split = args.indexOf("--");
const [tool, argsJson, times] = args.slice(0, split);
const [command, ...commandArgs] = args.slice(split + 1);
const client = new Client({ name: "agent-harness-e2e-ts", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args: commandArgs, stderr: "inherit" }));
for (let call = 1; call <= Number(times); call++) {
  const stream = client.experimental.tasks.callToolStream(
    { name: tool, arguments: JSON.parse(argsJson) },
    undefined,
    { task: { ttl: 60000 } },
  );
  for await (const message of stream) {
    const out = { call, type: message.type };
    if (message.type === "taskCreated" || message.type === "taskStatus") out.task = message.task;
    if (message.type === "result") out.result = message.result;
    if (message.type === "error") out.error = String(message.error?.message ?? message.error);
    console.log(JSON.stringify(out));
  }
}
await client.close();
