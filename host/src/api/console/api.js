// api.js: the signed-in key (this tab's sessionStorage, nothing else) and
// every call to the HTTP API (docs/api.md), which sends it as a Bearer key.

const STORE = 'agenthost.console.key';

export const auth = {
  key: () => sessionStorage.getItem(STORE),
  signIn: (key) => sessionStorage.setItem(STORE, key),
  signOut: () => sessionStorage.removeItem(STORE),
};

/** A minted key is `ahp_<16 hex id>_<64 hex>`; any other string is the bootstrap key. */
export function keyId(key) {
  const minted = /^ah[pi]_([0-9a-f]{16})_[0-9a-f]{64}$/.exec(key ?? '');
  return minted ? minted[1] : 'bootstrap';
}

/** An HTTP error with the API's `{"error": {"code", "message"}}`; status 0 when unreachable. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let refused = () => {};
/** `callback` runs when the server refuses the signed-in key (401). */
export function onRefused(callback) {
  refused = callback;
}

/** Calls the API with the signed-in key (or `key`); the parsed body, `null` for 204. */
export async function api(method, path, body, key = auth.key()) {
  const headers = { Authorization: `Bearer ${key}` };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, 'network', 'The server cannot be reached; try again in a moment.');
  }
  if (response.status === 401 && key === auth.key()) refused();
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || `http_${response.status}`,
      error.message || `The server answered ${response.status}.`);
  }
  return data;
}

/** A path segment, escaped. */
export const seg = (value) => encodeURIComponent(value);
