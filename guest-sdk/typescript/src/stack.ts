/**
 * Stack frames as the author wrote them. SpiderMonkey (the engine inside
 * componentize-js) names positions in the bundle esbuild wrote
 * (`name@agent.js:line:column`); `agenthost build` appends that bundle's
 * source map (positions only) as `globalThis.__agenthostSourceMap`, and
 * {@link authorFrame} maps each frame back to the file, line and column it
 * came from (`name (agent.ts:12:11)`). Without a map (or for a position it
 * does not cover) the bundle's position is kept.
 *
 * @module
 */

/** What `agenthost build` embeds: esbuild's map without the sources' text. */
export interface SourceMap {
  /** The sources, named as their author knows them (`agent.ts`, `@agenthost/sdk/src/turn.ts`). */
  sources: string[];
  /** The Source Map v3 `mappings` (Base64 VLQ). */
  mappings: string;
}

/** A position in a source: line and column from 1. */
export interface Position {
  source: string;
  line: number;
  column: number;
}

/** One mapped segment: the bundle column (from 0), then source index, line and column (from 0). */
type Segment = [number, number, number, number];

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Decodes one line's segment text (Base64 VLQ) into its numbers. */
function vlq(text: string): number[] {
  const values: number[] = [];
  let value = 0;
  let shift = 0;
  for (const char of text) {
    const digit = BASE64.indexOf(char);
    if (digit < 0) {
      throw new Error(`not a Base64 VLQ digit: ${char}`);
    }
    value += (digit & 31) * 2 ** shift;
    if (digit & 32) {
      shift += 5;
    } else {
      values.push(value % 2 === 1 ? -(value - 1) / 2 : value / 2);
      value = 0;
      shift = 0;
    }
  }
  return values;
}

/** A source map, decoded: each bundle line's segments, ordered by column. */
export class Mapper {
  readonly #sources: string[];
  readonly #lines: Segment[][];

  constructor(map: SourceMap) {
    this.#sources = map.sources;
    this.#lines = [];
    // Everything but the bundle column is relative to the previous segment of the whole map.
    let source = 0;
    let line = 0;
    let column = 0;
    for (const text of map.mappings.split(';')) {
      const segments: Segment[] = [];
      let bundleColumn = 0;
      for (const part of text.split(',')) {
        if (part === '') {
          continue;
        }
        const fields = vlq(part);
        bundleColumn += fields[0] ?? 0;
        if (fields.length < 4) {
          continue; // a position with no source
        }
        source += fields[1] ?? 0;
        line += fields[2] ?? 0;
        column += fields[3] ?? 0;
        segments.push([bundleColumn, source, line, column]);
      }
      this.#lines.push(segments);
    }
  }

  /** Where the bundle's `line`:`column` (from 1, as SpiderMonkey counts) came from. */
  lookup(line: number, column: number): Position | undefined {
    const segments = this.#lines[line - 1];
    if (!segments) {
      return undefined;
    }
    let found: Segment | undefined;
    for (const segment of segments) {
      if (segment[0] > column - 1) {
        break;
      }
      found = segment;
    }
    const source = found && this.#sources[found[1]];
    if (!found || source === undefined) {
      return undefined;
    }
    return { source, line: found[2] + 1, column: found[3] + 1 };
  }
}

/** The map `agenthost build` embedded, decoded once (only when a stack needs it). */
let embedded: Mapper | null | undefined;

function embeddedMapper(): Mapper | null {
  if (embedded === undefined) {
    const map = (globalThis as { __agenthostSourceMap?: SourceMap }).__agenthostSourceMap;
    try {
      embedded = map && typeof map.mappings === 'string' && Array.isArray(map.sources) ? new Mapper(map) : null;
    } catch {
      embedded = null;
    }
  }
  return embedded;
}

/** The bundle's file name in a stack. */
const BUNDLE = 'agent.js';

/** A SpiderMonkey frame: `name@file:line:column` (the name may be empty). */
const FRAME = /^(.*)@(.+):(\d+):(\d+)$/;

/**
 * One frame of an `Error.stack`, as `name (file:line:column)` in the
 * author's source when `mapper` (by default the embedded map) knows the
 * bundle position, else in the bundle. A line that is not a frame is kept.
 */
export function authorFrame(frame: string, mapper: Mapper | null = embeddedMapper()): string {
  const parts = FRAME.exec(frame);
  if (!parts) {
    return frame;
  }
  const [, name, file, line, column] = parts as unknown as [string, string, string, string, string];
  // Only the bundle (`agent.js`, as componentize-js names it) is mapped.
  const inBundle = file === BUNDLE || file.endsWith(`/${BUNDLE}`);
  const at = inBundle ? mapper?.lookup(Number(line), Number(column)) : undefined;
  const where = at ? `${at.source}:${at.line}:${at.column}` : `${file}:${line}:${column}`;
  return `${name || '<anonymous>'} (${where})`;
}
