// A client built on the official TypeScript SDK (1.32.2, which has the tasks
// of MCP 2025-11-25), for the integration test of tasks through the proxy:
// it reaches the proxy over stdio (argv: the command) or Streamable HTTP
// (argv: the URL), and drives server-everything's simulate-research-query
// (execution.taskSupport "required") as TASKS_TOOL names it:
//
//   - a task created, polled with tasks/get to its end, its result fetched;
//   - an ambiguous one, polled to input_required, whose tasks/result brings
//     the server's elicitation (answered here), then the result;
//   - a third one cancelled;
//   - tasks/list.
//
// Over HTTP (TASKS_SECOND=1) a second session, of the same agent, then
// tries every method on the first session's task ids. It prints one JSON
// object with what it saw.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  TaskStatusNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const [target, ...args] = process.argv.slice(2);
const tool = process.env.TASKS_TOOL;
const second = process.env.TASKS_SECOND === '1';
const waitMs = Number(process.env.TASKS_WAIT_MS || 60000);

function transportFor() {
  if (target.startsWith('http://')) {
    return new StreamableHTTPClientTransport(new URL(target));
  }
  return new StdioClientTransport({ command: target, args, env: process.env, stderr: 'inherit' });
}

const report = { elicitations: [], statusNotices: [] };
const client = new Client({ name: 'tasks-host', version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  report.elicitations.push({
    relatedTask: req.params._meta?.['io.modelcontextprotocol/related-task']?.taskId ?? null,
    message: req.params.message,
  });
  const options = req.params.requestedSchema.properties.interpretation.oneOf;
  return { action: 'accept', content: { interpretation: options[1].const } };
});
client.setNotificationHandler(TaskStatusNotificationSchema, async (n) => {
  report.statusNotices.push({ taskId: n.params.taskId, status: n.params.status });
});
await client.connect(transportFor());
report.protocol = client.transport.protocolVersion ?? null;
report.tasksCapability = client.getServerCapabilities()?.tasks ?? null;
const listed = (await client.listTools()).tools.find((t) => t.name === tool);
report.taskSupport = listed?.execution?.taskSupport ?? null;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function create(c, topic, ambiguous) {
  const res = await c.request(
    { method: 'tools/call', params: { name: tool, arguments: { topic, ambiguous }, task: { ttl: 120000 } } },
    CreateTaskResultSchema,
  );
  return res.task;
}

// poll calls tasks/get until the task's status is one of until.
async function poll(c, id, until) {
  const seen = [];
  const end = Date.now() + waitMs;
  for (;;) {
    const t = await c.experimental.tasks.getTask(id);
    if (t.taskId !== id) throw new Error(`tasks/get of ${id} answered task ${t.taskId}`);
    if (seen[seen.length - 1] !== t.status) seen.push(t.status);
    if (until.includes(t.status)) return seen;
    if (Date.now() > end) throw new Error(`task ${id} still ${t.status} after ${waitMs} ms`);
    await sleep(Math.min(t.pollInterval ?? 200, 200));
  }
}

async function outcome(p) {
  try {
    return { ok: await p };
  } catch (err) {
    return { code: err.code ?? null, message: String(err.message) };
  }
}

try {
  const plain = await create(client, 'tides', false);
  report.created = { taskId: plain.taskId, status: plain.status };
  report.plainStatuses = await poll(client, plain.taskId, ['completed', 'failed', 'cancelled']);
  const result = await client.experimental.tasks.getTaskResult(plain.taskId, CallToolResultSchema);
  report.plainResult = {
    text: result.content[0].text,
    relatedTask: result._meta?.['io.modelcontextprotocol/related-task']?.taskId ?? null,
  };

  const ambiguous = await create(client, 'python', true);
  report.ambiguousId = ambiguous.taskId;
  report.ambiguousStatuses = await poll(client, ambiguous.taskId, ['input_required', 'completed', 'failed']);
  const clarified = await client.experimental.tasks.getTaskResult(ambiguous.taskId, CallToolResultSchema);
  report.ambiguousText = clarified.content[0].text;

  const doomed = await create(client, 'weather', false);
  report.doomedId = doomed.taskId;
  const cancelled = await client.experimental.tasks.cancelTask(doomed.taskId);
  report.cancelled = { taskId: cancelled.taskId, status: cancelled.status };

  report.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => ({ taskId: t.taskId, status: t.status }));

  if (second) {
    const other = new Client({ name: 'tasks-host-2', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    await other.connect(transportFor());
    report.other = {
      get: await outcome(other.experimental.tasks.getTask(plain.taskId)),
      result: await outcome(other.experimental.tasks.getTaskResult(plain.taskId, CallToolResultSchema)),
      cancel: await outcome(other.experimental.tasks.cancelTask(ambiguous.taskId)),
      list: (await other.experimental.tasks.listTasks()).tasks.map((t) => t.taskId),
    };
    await other.close();
  }
} catch (err) {
  report.error = String(err.stack ?? err);
}
await client.close();
process.stdout.write(JSON.stringify(report) + '\n');
