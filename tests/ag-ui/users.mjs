// The real AG-UI client (@ag-ui/client, its HttpAgent) as two end users of
// one app, each with a JWT of the app's identity provider, driven by
// tests/e2e/agui.rs:
//
//   node users.mjs <base url> <app> <route> <thread id> <ada's JWT> <bob's JWT> <expired JWT>
//
// Ada and Bob run on the SAME threadId (the id pattern a frontend would
// use): Ada tells her card number, Bob asks what he said before, Ada asks
// the same. Then Bob reads Ada's session through the AG-UI events
// endpoint, and an expired token tries a run. Prints one JSON report.

import { HttpAgent } from "@ag-ui/client";

const [base, app, route, thread, ada, bob, expired] = process.argv.slice(2);
const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}

function agentFor(token) {
  return new HttpAgent({
    url: `${base}/ag-ui/${app}/${encodeURIComponent(route.replace(/^\//, ""))}`,
    headers: { Authorization: `Bearer ${token}` },
    threadId: thread,
  });
}

/// One run of `agent` with `text`: the session its RUN_STARTED names, the
/// reply's text, how it ended (or the error the client raised).
async function say(agent, text) {
  agent.messages.push({ id: crypto.randomUUID(), role: "user", content: text });
  const events = [];
  try {
    await agent.runAgent({}, { onEvent: ({ event }) => events.push(event) });
  } catch (error) {
    return { error: String(error?.message ?? error), events: events.length };
  }
  const started = events.find((e) => e.type === "RUN_STARTED");
  const reply = events
    .filter((e) => e.type === "TEXT_MESSAGE_CONTENT")
    .map((e) => e.delta)
    .join("");
  return {
    session: started?.metadata?.agenthost?.session_id,
    reply,
    last: events.at(-1)?.type,
  };
}

const report = { warnings };
try {
  const adas = agentFor(ada);
  const bobs = agentFor(bob);
  report.ada1 = await say(adas, "my card number is 4111");
  report.bob1 = await say(bobs, "what did I say before?");
  report.ada2 = await say(adas, "what did I say before?");
  const url = `${base}/sessions/${report.ada1.session}/events?format=ag-ui`;
  const peek = await fetch(url, {
    headers: { Authorization: `Bearer ${bob}`, Accept: "text/event-stream" },
  });
  report.bobReadsAda = { status: peek.status, body: await peek.text() };
  report.expired = await say(agentFor(expired), "hello?");
} catch (error) {
  report.error = String(error?.stack ?? error);
}
process.stdout.write(JSON.stringify(report));
