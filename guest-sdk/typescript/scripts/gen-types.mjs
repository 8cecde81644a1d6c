// Generates the TypeScript declarations of the world a TypeScript agent is
// built for (`wit/world.wit`, `wit/deps/`, and the repository's
// `wit/agent.wit`) into `src/wit/`, with jco's type generator.
//
//     (cd ../../examples/typescript && npm ci)   # once
//     npm run gen:types
//
// The generator is jco 1.35.0's (`@bytecodealliance/jco-transpile` 0.15.0),
// which componentize-js 0.23.0 brings into examples/typescript/node_modules;
// `JCO_TRANSPILE=<dir>` names another copy. (The SDK does not depend on jco
// itself: npm writes a lockfile for it that `npm ci` then refuses, missing
// platform packages that are not published.) jco 1.35's `jco guest-types`
// CLI cannot read WIT paths under Node 20 (its WASI filesystem sees none),
// so this script hands the generator the WIT as one source text, each
// dependency package nested in it.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const sdk = join(dirname(fileURLToPath(import.meta.url)), '..');
const transpile =
  process.env.JCO_TRANSPILE ?? join(sdk, '../../examples/typescript/node_modules/@bytecodealliance/jco-transpile');
const { $init, generateTypes } = await import(
  pathToFileURL(join(transpile, 'vendor/js-component-bindgen-component.js')).href
);
const read = (path) => readFileSync(join(sdk, path), 'utf8');
/** A package file as a nested package block. */
const nest = (text) => text.replace(/^package ([^;]+);/m, 'package $1 {') + '\n}\n';

const source = [
  read('wit/world.wit'),
  nest(read('wit/deps/cli/environment.wit')),
  nest(read('../../wit/agent.wit')),
].join('\n');

await $init;
const files = generateTypes('agent', {
  wit: { tag: 'source', val: source },
  world: 'agent',
  guest: true,
  features: { tag: 'list', val: [] },
});
const out = join(sdk, 'src/wit');
rmSync(out, { recursive: true, force: true });
for (const [name, data] of files) {
  const path = join(out, name);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, data);
  console.log(`wrote src/wit/${name}`);
}
