// Interop client for mcpfront's tests: the official TypeScript MCP SDK
// (pinned in package.json) calls one tool on a Latch MCP front and prints
// one JSON line: the tool names it saw, how many progress notifications and
// resumption tokens arrived, and the call's result.
//
// usage: node client.mjs URL TOKEN [TOOL [ARGS_JSON]]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool = "slow_job", argsJSON = '{"job":"interop"}'] = process.argv.slice(2);
if (!url || !token) {
  console.error("usage: node client.mjs URL TOKEN [TOOL [ARGS_JSON]]");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
  reconnectionOptions: {
    initialReconnectionDelay: 100,
    maxReconnectionDelay: 1000,
    reconnectionDelayGrowFactor: 1.5,
    maxRetries: 5,
  },
});
const client = new Client({ name: "latch-ts-interop", version: "1.0.0" });

try {
  await client.connect(transport);
  const listed = await client.listTools();
  let progress = 0;
  let resumptions = 0;
  const result = await client.callTool(
    { name: tool, arguments: JSON.parse(argsJSON) },
    undefined,
    {
      onprogress: () => { progress++; },
      onresumptiontoken: () => { resumptions++; },
      timeout: 120000,
      resetTimeoutOnProgress: true,
    },
  );
  console.log(JSON.stringify({
    protocolVersion: transport.protocolVersion,
    sessionId: transport.sessionId,
    tools: listed.tools.map((t) => t.name),
    progress,
    resumptions,
    result,
  }));
  await client.close();
} catch (err) {
  console.error(`interop client failed: ${err?.stack ?? err}`);
  process.exit(1);
}
