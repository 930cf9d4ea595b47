// A host built on the official TypeScript SDK that reads its servers the way
// Claude Desktop and Cursor do: a JSON file with "mcpServers", each entry a
// command, its args and an optional env. It starts the one entry named in
// argv over stdio, lists its tools, calls the tool named in argv with the
// JSON arguments given, and prints one JSON object: the tool names and the
// call's result.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [configFile, entry, tool, toolArgs] = process.argv.slice(2);
const server = JSON.parse(readFileSync(configFile, 'utf8')).mcpServers[entry];
if (!server) {
  throw new Error(`${configFile} has no mcpServers.${entry}`);
}
// The test's environment (a temp HOME and state directory, npm kept
// offline) goes to the server, with the entry's own env over it.
const transport = new StdioClientTransport({
  command: server.command,
  args: server.args ?? [],
  env: { ...process.env, ...(server.env ?? {}) },
  stderr: 'inherit',
});
const client = new Client({ name: 'config-host', version: '1.0.0' });
await client.connect(transport);
const report = {};
report.tools = (await client.listTools()).tools.map((t) => t.name).sort();
report.result = await client.callTool({ name: tool, arguments: JSON.parse(toolArgs) });
await client.close();
process.stdout.write(JSON.stringify(report) + '\n');
