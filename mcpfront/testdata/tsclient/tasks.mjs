// Task interop client for mcpfront's tests: the official TypeScript MCP SDK
// (pinned in package.json) drives Latch's MCP tasks and prints one JSON line.
//
// usage: node tasks.mjs URL TOKEN MODE TOOL ARGS_JSON [TASK_ID]
//   create  2025-11-25: a task-augmented tools/call (the SDK's request with
//           CreateTaskResultSchema); prints the task, then exits (the
//           connection drops mid-task).
//   follow  2025-11-25: a new session polls TASK_ID with tasks/get until it
//           is terminal, then tasks/result; prints the statuses and result.
//   stream  2025-11-25: the SDK's experimental callToolStream (task created,
//           polled, result fetched by the SDK itself).
//   modern  2026-07-28: raw JSON-RPC through the SDK's Streamable HTTP
//           transport (the SDK speaks at most 2025-11-25): tools/call with the
//           tasks extension declared, then tasks/get until completed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  GetTaskResultSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, token, mode, tool, argsJSON = "{}", taskId] = process.argv.slice(2);
if (!url || !token || !mode) {
  console.error("usage: node tasks.mjs URL TOKEN MODE TOOL ARGS_JSON [TASK_ID]");
  process.exit(2);
}
const args = JSON.parse(argsJSON);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const terminal = (s) => s === "completed" || s === "failed" || s === "cancelled";

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client(
    { name: "latch-ts-tasks", version: "1.0.0" },
    { capabilities: { tasks: { list: {}, cancel: {} } } },
  );
  await client.connect(transport);
  return client;
}

// One raw 2026-07-28 request through the SDK's transport: a transport per
// request, so that its routing headers (Mcp-Method, Mcp-Name) are this
// request's.
let nextId = 1;
async function modernRequest(method, params, name) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: {
      headers: { Authorization: `Bearer ${token}`, "Mcp-Method": method, "Mcp-Name": name },
    },
  });
  const id = nextId++;
  const answer = new Promise((resolve, reject) => {
    transport.onmessage = (m) => { if (m.id === id) resolve(m); };
    transport.onerror = reject;
  });
  await transport.start();
  transport.setProtocolVersion("2026-07-28");
  const meta = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": { name: "latch-ts-tasks", version: "1.0.0" },
    "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
  };
  await transport.send({ jsonrpc: "2.0", id, method, params: { ...params, _meta: meta } });
  const m = await answer;
  await transport.close();
  if (m.error) throw new Error(`${method}: ${JSON.stringify(m.error)}`);
  return m.result;
}

try {
  let out;
  if (mode === "create") {
    const client = await connect();
    const created = await client.request(
      { method: "tools/call", params: { name: tool, arguments: args, task: { ttl: 60000 } } },
      CreateTaskResultSchema,
    );
    out = { task: created.task };
    await client.close();
  } else if (mode === "follow") {
    const client = await connect();
    const statuses = [];
    let task;
    for (let i = 0; i < 600; i++) {
      task = await client.request({ method: "tasks/get", params: { taskId } }, GetTaskResultSchema);
      statuses.push(task.status);
      if (terminal(task.status)) break;
      await sleep(Math.min(task.pollInterval ?? 100, 100));
    }
    const result = await client.request({ method: "tasks/result", params: { taskId } }, CallToolResultSchema);
    out = { statuses, task, result };
    await client.close();
  } else if (mode === "stream") {
    const client = await connect();
    const messages = [];
    let result;
    for await (const m of client.experimental.tasks.callToolStream(
      { name: tool, arguments: args }, CallToolResultSchema, { task: { ttl: 60000 } },
    )) {
      messages.push(m.type);
      if (m.type === "taskCreated") out = { taskId: m.task.taskId };
      if (m.type === "result") result = m.result;
      if (m.type === "error") throw m.error;
    }
    out = { ...out, messages, result };
    await client.close();
  } else if (mode === "modern") {
    const created = await modernRequest("tools/call", { name: tool, arguments: args }, tool);
    if (created.resultType !== "task") throw new Error(`tools/call answered ${JSON.stringify(created)}, want a task`);
    const statuses = [];
    let task;
    for (let i = 0; i < 600; i++) {
      task = await modernRequest("tasks/get", { taskId: created.taskId }, created.taskId);
      statuses.push(task.status);
      if (terminal(task.status)) break;
      await sleep(100);
    }
    out = { created, statuses, task };
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  console.log(JSON.stringify(out));
} catch (err) {
  console.error(`tasks client failed: ${err?.stack ?? err}`);
  process.exit(1);
}
