// Runs the SDK's unit tests (tests/*.test.ts) under plain Node.js: each test
// file is bundled with esbuild (the host imports replaced by a stub that
// throws, since they exist only inside a component), then run with
// `node --test`.
//
//     npm test                     # with the SDK's own devDependencies
//     ESBUILD=<node_modules>/esbuild/lib/main.js node tests/run.mjs
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const esbuild = await import(process.env.ESBUILD ? pathToFileURL(process.env.ESBUILD).href : 'esbuild');

/** `agenthost:*` and `wasi:*` imports: a module whose every function throws (the llm ones unless a test answers them). */
const stubHost = {
  name: 'stub-host',
  setup(build) {
    build.onResolve({ filter: /^(agenthost|wasi):/ }, (args) => ({ path: args.path, namespace: 'stub' }));
    build.onLoad({ filter: /.*/, namespace: 'stub' }, () => ({
      contents:
        'const outside = () => { throw new Error("the host imports exist only inside a component"); };\n' +
        'export const messageStart = outside, messageDelta = outside, messageEnd = outside, toolCalls = outside,\n' +
        '  toolResult = outside, readHistory = outside, endSession = outside, reportPanic = outside,\n' +
        '  schedule = outside, cancelSchedule = outside,\n' +
        '  getEnvironment = () => [];\n' +
        '// The llm imports: a test may answer them through globalThis.agenthostTestLlm.\n' +
        'export const aliases = (...a) => (globalThis.agenthostTestLlm ?? { aliases: outside }).aliases(...a);\n' +
        'export const complete = (...a) => (globalThis.agenthostTestLlm ?? { complete: outside }).complete(...a);\n',
      loader: 'js',
    }));
  },
};

const out = mkdtempSync(join(tmpdir(), 'agenthost-sdk-tests-'));
try {
  const files = readdirSync(here).filter((f) => f.endsWith('.test.ts'));
  await esbuild.build({
    entryPoints: files.map((f) => join(here, f)),
    outdir: out,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: ['node:*'],
    plugins: [stubHost],
    logLevel: 'warning',
  });
  const tests = files.map((f) => join(out, f.replace(/\.ts$/, '.mjs')));
  const run = spawnSync(process.execPath, ['--test', ...tests], { stdio: 'inherit' });
  process.exitCode = run.status ?? 1;
} finally {
  rmSync(out, { recursive: true, force: true });
}
