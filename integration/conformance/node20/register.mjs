// Preloaded with `node --import <absolute path of this file>` on Node.js
// older than 22. It installs hooks.mjs, which gives the conformance runner
// an `fs` module that has `globSync` (Node 22 added it; the runner imports
// it by name at link time and cannot even print --help without it).
// Nothing else in the process is affected.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
