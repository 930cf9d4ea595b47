// A client built on the official TypeScript SDK (which speaks 2025-11-25),
// for the integration tests of both protocol eras: it reaches the proxy over
// stdio (argv: the command) or Streamable HTTP (argv: the URL), declares
// elicitation, sampling and roots and answers them, calls the tools the test
// names, subscribes to a resource, and prints one JSON object with what it
// saw: the protocol version, each call's text (or error), the resource it
// subscribed to and the one it was told was updated.
//
// Environment: ERAS_CALLS is a JSON array of {name, arguments, until?} (a
// call with until is made again, every ERAS_AGAIN_MS, while its text does
// not hold until, at most ERAS_WAIT_MS); ERAS_WATCHED
// the upstream's URI of the resource to subscribe to (the host subscribes
// to the listed resource of that URI, or of a URI that ends in "+" and it,
// as the proxy namespaces URIs); ERAS_START_UPDATES
// an optional tool to call after subscribing; ERAS_ROOT the client's root.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const [target, ...args] = process.argv.slice(2);
const calls = JSON.parse(process.env.ERAS_CALLS || '[]');
const watched = process.env.ERAS_WATCHED || '';
const startUpdates = process.env.ERAS_START_UPDATES || '';
const root = process.env.ERAS_ROOT || '';
const waitMs = Number(process.env.ERAS_WAIT_MS || 30000);
const againMs = Number(process.env.ERAS_AGAIN_MS || 100);

const client = new Client(
  { name: 'eras-host', version: '1.0.0' },
  { capabilities: { elicitation: {}, sampling: {}, roots: { listChanged: true } } },
);
client.setRequestHandler(ElicitRequestSchema, async () => ({
  action: 'accept',
  content: { name: 'Ada Lovelace' },
}));
client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  role: 'assistant',
  model: 'eras-model',
  content: { type: 'text', text: 'Paris, said the client' },
}));
client.setRequestHandler(ListRootsRequestSchema, async () => ({
  roots: root ? [{ uri: root, name: 'client root' }] : [],
}));
let listed = null;
let updated;
const gotUpdate = new Promise((resolve) => {
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => {
    if (n.params.uri === listed) {
      updated = n.params.uri;
      resolve();
    }
  });
});

const transport = target.startsWith('http')
  ? new StreamableHTTPClientTransport(new URL(target))
  : new StdioClientTransport({ command: target, args, env: process.env, stderr: 'inherit' });
// The version the initialize result carries reaches the transport (which
// stdio's does not keep): note it on the way.
let protocolVersion = null;
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (v) => {
  protocolVersion = v;
  setVersion?.(v);
};
await client.connect(transport);
// A host tells its servers when its roots are set, as hosts do on opening
// a workspace.
if (root) await client.sendRootsListChanged();

const report = { protocolVersion, calls: {} };
for (const call of calls) {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const res = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
      const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
      report.calls[call.name] = { isError: Boolean(res.isError), text };
    } catch (err) {
      report.calls[call.name] = { error: String(err?.message ?? err) };
    }
    const text = report.calls[call.name].text ?? '';
    if (!call.until || text.includes(call.until) || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, againMs));
  }
}
if (watched) {
  for (let cursor; ; ) {
    const page = await client.listResources(cursor ? { cursor } : {});
    const r = page.resources.find((r) => r.uri === watched || r.uri.endsWith('+' + watched));
    if (r) listed = r.uri;
    cursor = page.nextCursor;
    if (listed || !cursor) break;
  }
  report.subscribed = listed;
  if (listed) await client.subscribeResource({ uri: listed });
  if (startUpdates) {
    await client.callTool({ name: startUpdates, arguments: {} });
  }
  if (listed) {
    let timer;
    await Promise.race([gotUpdate, new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }
  report.updated = updated ?? null;
}
await client.close();
process.stdout.write(JSON.stringify(report) + '\n');
