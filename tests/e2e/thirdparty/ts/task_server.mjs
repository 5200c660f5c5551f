// A stdio MCP server on the official TypeScript SDK whose one write tool runs as a task
// (2025-11-25 tasks). Every execution is appended to the ground-truth file BEFORE the task's
// result is stored, so a test can hold a proxy's report against what really ran.
//
//   node task_server.mjs GROUND_TRUTH.jsonl [--fail]
//
// create_report {title}: a task that executes at once and completes (with --fail: fails with
// an isError result and executes nothing).
import { appendFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { z } from "zod";

const [truthPath, ...flags] = process.argv.slice(2);
const fail = flags.includes("--fail");
const taskStore = new InMemoryTaskStore();
const server = new McpServer(
  { name: "agent-harness-e2e-tasks", version: "1.0.0" },
  {
    capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
    taskStore,
  },
);

server.experimental.tasks.registerToolTask(
  "create_report",
  {
    description: "Create a report; runs as a task.",
    inputSchema: { title: z.string() },
    execution: { taskSupport: "optional" },
    annotations: { readOnlyHint: false },
  },
  {
    createTask: async (args, extra) => {
      const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 50 });
      if (fail) {
        await extra.taskStore.storeTaskResult(task.taskId, "failed", {
          content: [{ type: "text", text: "report failed" }],
          isError: true,
        });
      } else {
        appendFileSync(truthPath, JSON.stringify({ tool: "create_report", arguments: args }) + "\n");
        await extra.taskStore.storeTaskResult(task.taskId, "completed", {
          content: [{ type: "text", text: `report ${args.title} created` }],
        });
      }
      return { task };
    },
    getTask: async (args, extra) => await extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (args, extra) => await extra.taskStore.getTaskResult(extra.taskId),
  },
);

await server.connect(new StdioServerTransport());
