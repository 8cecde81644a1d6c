/**
 * JSON text as the SDK writes it: compact, object keys sorted (as the Rust
 * SDK's `serde_json` writes a value), so the same value is the same text in
 * every SDK.
 *
 * @module
 */

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(sorted);
  }
  if (value !== null && typeof value === 'object') {
    const withJson = value as { toJSON?: () => unknown };
    if (typeof withJson.toJSON === 'function') {
      return sorted(withJson.toJSON());
    }
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const item = (value as Record<string, unknown>)[key];
      if (item !== undefined && typeof item !== 'function' && typeof item !== 'symbol') {
        out[key] = sorted(item);
      }
    }
    return out;
  }
  return value;
}

/**
 * `value` as compact JSON text with sorted keys. Throws a `TypeError` for
 * what JSON cannot hold (`undefined` at the top, a `bigint`, a cycle, a
 * number that is not finite).
 */
export function dumps(value: unknown): string {
  const text = JSON.stringify(sorted(value), (_key, item: unknown) => {
    if (typeof item === 'number' && !Number.isFinite(item)) {
      throw new TypeError(`${item} is not a JSON number`);
    }
    if (typeof item === 'bigint') {
      throw new TypeError('a bigint is not JSON');
    }
    return item;
  });
  if (text === undefined) {
    throw new TypeError(`${typeof value} is not JSON`);
  }
  return text;
}

/** `value` as plain JSON data (what reading its JSON text back gives). */
export function toJsonValue(value: unknown): unknown {
  return JSON.parse(dumps(value));
}
