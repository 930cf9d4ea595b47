// A host built on the official TypeScript SDK, for the integration tests:
// it starts the command given in argv over stdio, the way Node hosts start
// their servers (Node gives the child sockets, not pipes), and prints one
// JSON object with what it saw: the kind of the child's stdin, the tool
// names, an echo of text with non-ASCII and HTML characters, the length of
// a large result, and the answers of concurrent calls.
import { readlinkSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [command, ...args] = process.argv.slice(2);
const bigBytes = Number(process.env.TSHOST_BIG_BYTES || 4 << 20);
const concurrent = Number(process.env.TSHOST_CONCURRENT || 16);

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
const client = new Client({ name: 'tshost', version: '1.0.0' });
await client.connect(transport);

const report = {};
try {
  report.stdin = readlinkSync(`/proc/${transport.pid}/fd/0`);
} catch (err) {
  report.stdin = `unknown: ${err.message}`;
}
report.tools = (await client.listTools()).tools.map((t) => t.name).sort();

const text = 'héllo <b>&</b> ✓';
const echo = await client.callTool({ name: 'fx__echo', arguments: { text } });
report.echo = echo.content[0].text;
report.echoSent = text;

const big = await client.callTool({ name: 'fx__big', arguments: { bytes: bigBytes } });
report.bigLength = big.content[0].text.length;
report.bigIsError = Boolean(big.isError);

const calls = [];
for (let i = 0; i < concurrent; i++) {
  calls.push(client.callTool({ name: 'fx__echo', arguments: { text: `call ${i}` } }));
}
report.concurrent = (await Promise.all(calls)).map((r) => r.content[0].text);

await client.close();
process.stdout.write(JSON.stringify(report) + '\n');
