// Module resolution hook (see register.mjs). Only imports of `fs` made by a
// module inside the @modelcontextprotocol/conformance package are sent to
// fs-shim.mjs; every other import resolves as usual.
const conformancePackage = '/node_modules/@modelcontextprotocol/conformance/';
const shimURL = new URL('./fs-shim.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  const fromConformance =
    typeof context.parentURL === 'string' && context.parentURL.includes(conformancePackage);
  if (fromConformance && (specifier === 'fs' || specifier === 'node:fs')) {
    return { url: shimURL, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
