/**
 * Checking a tool's arguments against its JSON Schema, written by hand in
 * the tool's declaration. The SDK checks the subset of JSON Schema that
 * describes data (`type`, `properties`, `required`, `additionalProperties`,
 * `items`, `enum`, `const`, `anyOf`, `oneOf`, `minimum`, `maximum`,
 * `minLength`, `maxLength`, `minItems`, `maxItems`) and ignores the rest
 * (`description`, `format`, ...); a missing top-level property with a
 * `default` gets (a copy of) it.
 *
 * @module
 */

import { isObject } from './history.ts';

/** A JSON Schema, as a plain object. */
export type JsonSchema = Record<string, unknown>;

const TYPE_WORDS: Record<string, string> = {
  object: 'an object',
  array: 'an array',
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'a boolean',
  null: 'null',
};

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function fits(type: string, value: unknown): boolean {
  const actual = typeOf(value);
  return type === actual || (type === 'number' && actual === 'integer');
}

function where(path: string): string {
  return path ? `\`${path}\`: ` : '';
}

/** What is wrong with `value` against `schema` (at `path`), or `undefined` when it fits. */
export function check(schema: unknown, value: unknown, path = ''): string | undefined {
  if (!isObject(schema)) {
    return undefined; // `true`, `{}`-like or not a schema: anything goes
  }
  const type = schema.type;
  const types = Array.isArray(type) ? type : typeof type === 'string' ? [type] : undefined;
  if (types && !types.some((t) => typeof t === 'string' && fits(t, value))) {
    const wanted = types.map((t) => TYPE_WORDS[String(t)] ?? String(t)).join(' or ');
    return `${where(path)}invalid type: expected ${wanted}, found ${TYPE_WORDS[typeOf(value)] ?? typeOf(value)}`;
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((v) => same(v, value))) {
    const allowed = schema.enum.map((v) => JSON.stringify(v)).join(', ');
    return `${where(path)}${JSON.stringify(value)} is not one of ${allowed}`;
  }
  if ('const' in schema && !same(schema.const, value)) {
    return `${where(path)}expected ${JSON.stringify(schema.const)}`;
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key];
    if (Array.isArray(options) && options.length > 0) {
      const errors = options.map((option) => check(option, value, path));
      if (errors.every((e) => e !== undefined)) {
        return errors[0];
      }
    }
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) {
      return `${where(path)}${value} is less than ${schema.minimum}`;
    }
    if (typeof schema.maximum === 'number' && value > schema.maximum) {
      return `${where(path)}${value} is more than ${schema.maximum}`;
    }
  }
  if (typeof value === 'string') {
    const length = [...value].length;
    if (typeof schema.minLength === 'number' && length < schema.minLength) {
      return `${where(path)}shorter than ${schema.minLength} characters`;
    }
    if (typeof schema.maxLength === 'number' && length > schema.maxLength) {
      return `${where(path)}longer than ${schema.maxLength} characters`;
    }
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) {
      return `${where(path)}fewer than ${schema.minItems} items`;
    }
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) {
      return `${where(path)}more than ${schema.maxItems} items`;
    }
    for (let i = 0; i < value.length; i++) {
      const error = check(schema.items, value[i], `${path}[${i}]`);
      if (error) return error;
    }
  }
  if (isObject(value)) {
    const properties = isObject(schema.properties) ? schema.properties : {};
    if (Array.isArray(schema.required)) {
      for (const name of schema.required) {
        if (typeof name === 'string' && !(name in value)) {
          return `${where(path)}missing field \`${name}\``;
        }
      }
    }
    for (const [name, item] of Object.entries(value)) {
      const inner = path ? `${path}.${name}` : name;
      if (name in properties) {
        const error = check(properties[name], item, inner);
        if (error) return error;
      } else if (schema.additionalProperties === false) {
        return `${where(path)}unknown field \`${name}\``;
      } else {
        const error = check(schema.additionalProperties, item, inner);
        if (error) return error;
      }
    }
  }
  return undefined;
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** `args` with the top-level defaults of `schema` filled in (a new object). */
export function withDefaults(schema: JsonSchema, args: unknown): unknown {
  if (!isObject(args) || !isObject(schema.properties)) {
    return args;
  }
  const out: Record<string, unknown> = { ...args };
  for (const [name, property] of Object.entries(schema.properties)) {
    if (!(name in out) && isObject(property) && 'default' in property) {
      out[name] = structuredClone(property.default);
    }
  }
  return out;
}
