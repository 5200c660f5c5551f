// A booking agent on the Vercel AI SDK (`ai`, `@ai-sdk/mcp`, `@ai-sdk/openai`), as its docs
// show one: an MCP client over streamable HTTP whose tools go to generateText with an
// OpenAI-compatible chat model; the defaults kept.
//
// The runner hands it the proxy's URL (the generated mcpServers configuration) and its model
// endpoint (a scripted reference model behind an OpenAI-compatible API); it never reaches
// OpenAI. Installed by `make agents-deps` (package.json and its lock file beside this file).
// SURVEY_MCP_RETRIES sets the MCP client's own retry of failed tool calls (`maxRetries`,
// default 0: HTTP 408/409/429/5xx and dropped connections), as a user who turns it on would.
import { readFileSync } from 'node:fs';
import { generateText, stepCountIs } from 'ai';
import { createMCPClient } from '@ai-sdk/mcp';
import { createOpenAI } from '@ai-sdk/openai';

const env = process.env;
const config = JSON.parse(readFileSync(env.AGENT_HARNESS_MCP_CONFIG, 'utf8'));
const url = config.mcpServers[env.AGENT_HARNESS_MCP_SERVER].url;
const maxRetries = Number(env.SURVEY_MCP_RETRIES ?? '0');
const client = await createMCPClient({ transport: { type: 'http', url }, maxRetries });
try {
  const openai = createOpenAI({ baseURL: env.AGENT_HARNESS_MODEL_BASE_URL, apiKey: env.AGENT_HARNESS_MODEL_API_KEY });
  const result = await generateText({
    model: openai.chat(env.AGENT_HARNESS_MODEL),
    system: env.AGENT_HARNESS_PROMPT,
    prompt: env.AGENT_HARNESS_USER_MESSAGE,
    tools: await client.tools(),
    stopWhen: stepCountIs(8),
  });
  console.log(`agent: ${result.text}`);
} finally {
  await client.close();
}
