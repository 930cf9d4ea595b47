// Node's own `fs`, plus a `globSync` export when the running Node lacks one.
// The conformance runner uses globSync only in its `tier-check` command,
// which the tests never run; the stand-in fails loudly if it is ever called.
import fs from 'node:fs';

export * from 'node:fs';
export default fs;

export const globSync =
  fs.globSync ??
  function globSync() {
    throw new Error(`fs.globSync needs Node.js 22 or later (running ${process.version})`);
  };
