// The real AG-UI client (@ag-ui/client 1.0, its HttpAgent) against a live
// agenthost serving examples/ops, driven by tests/e2e/agui.rs:
//
//   node client.mjs <base url> <api key> <app> <route>
//
// On one thread: four runs (a reply with tool calls and their results; a
// second run that carries the first's records; a gated call that ends the
// run with an interrupt; the resume that approves it), each through the
// client's own pipeline (schema enforcement, event verification, apply).
// Then the thread's session is read back from the AG-UI form of the events
// endpoint twice through the same pipeline (`connectAgent`): once in one
// go, and once dropped and resumed with Last-Event-ID at given frames.
//
// Prints one JSON report on stdout; the Rust test asserts on it. Any
// warning or error the client logs (e.g. an event property it had to
// strip) is collected in `warnings`, which the test requires to be empty.

import { AbstractAgent, HttpAgent } from "@ag-ui/client";
import { Observable } from "rxjs";

const [base, key, app, route] = process.argv.slice(2);
const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}
const auth = { Authorization: `Bearer ${key}` };

const agent = new HttpAgent({
  url: `${base}/ag-ui/${app}/${encodeURIComponent(route.replace(/^\//, ""))}`,
  headers: auth,
  threadId: `thread-${crypto.randomUUID()}`,
});

/// One run: the events the client applied, how it ended, the new messages.
async function run(text, parameters = {}) {
  if (text !== undefined) {
    agent.messages.push({ id: crypto.randomUUID(), role: "user", content: text });
  }
  const events = [];
  let outcome;
  const result = await agent.runAgent(parameters, {
    onEvent: ({ event }) => {
      events.push(event);
    },
    onRunFinishedEvent: (params) => {
      outcome =
        params.outcome === "interrupt"
          ? { type: "interrupt", interrupts: params.interrupts }
          : { type: params.outcome };
    },
  });
  return { events, outcome, newMessages: result.newMessages };
}

/// Reads the AG-UI form of a session's events endpoint, resuming with
/// Last-Event-ID after dropping the connection once `frames` reaches each
/// count in `dropAt`; completes after the `runs`th run ended.
class JournalReader extends AbstractAgent {
  constructor(url, dropAt, runs) {
    super({ threadId: "reader" });
    this.url = url;
    this.dropAt = dropAt;
    this.runs = runs;
    this.frames = [];
    this.connections = 0;
  }

  connect() {
    return new Observable((subscriber) => {
      let stopped = false;
      let lastId;
      let ended = 0;
      const reader = this;
      (async () => {
        while (!stopped) {
          const abort = new AbortController();
          const headers = { ...auth, Accept: "text/event-stream" };
          if (lastId !== undefined) headers["Last-Event-ID"] = lastId;
          reader.connections += 1;
          const response = await fetch(reader.url, { headers, signal: abort.signal });
          if (response.status !== 200) {
            throw new Error(`events endpoint: HTTP ${response.status}: ${await response.text()}`);
          }
          const decoder = new TextDecoder();
          let buffer = "";
          let dropped = false;
          try {
            for await (const chunk of response.body) {
              buffer += decoder.decode(chunk, { stream: true });
              let cut;
              while (!dropped && (cut = buffer.indexOf("\n\n")) >= 0) {
                const block = buffer.slice(0, cut);
                buffer = buffer.slice(cut + 2);
                let id;
                const data = [];
                for (const line of block.split("\n")) {
                  if (line.startsWith("id:")) id = line.slice(3).trim();
                  if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
                }
                if (data.length === 0) continue;
                const event = JSON.parse(data.join("\n"));
                reader.frames.push({ id, event });
                if (id !== undefined) lastId = id;
                subscriber.next(event);
                if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") ended += 1;
                if (ended === reader.runs) {
                  stopped = true;
                  abort.abort();
                  subscriber.complete();
                  return;
                }
                if (reader.dropAt.includes(reader.frames.length)) {
                  dropped = true;
                  abort.abort();
                }
              }
              if (dropped) break;
            }
          } catch (err) {
            if (!dropped) throw err;
          }
          if (!dropped) throw new Error("the events endpoint ended before the last run");
        }
      })().catch((err) => subscriber.error(err));
      return () => {
        stopped = true;
      };
    });
  }
}

async function read(session, dropAt, runs) {
  const url = `${base}/sessions/${session}/events?format=ag-ui`;
  const reader = new JournalReader(url, dropAt, runs);
  await reader.connectAgent();
  return {
    frames: reader.frames,
    connections: reader.connections,
    messages: reader.messages,
  };
}

const report = { warnings };
try {
  report.runs = [];
  report.runs.push(await run("add apples pears"));
  report.runs.push(await run("list"));
  report.runs.push(await run("delete apples"));
  const interrupt = report.runs[2].outcome.interrupts?.[0];
  // The client itself refuses a run that does not answer the interrupt.
  try {
    await run("list");
    report.unansweredRun = "accepted";
  } catch (err) {
    report.unansweredRun = String(err.message ?? err);
    agent.messages.pop();
  }
  report.runs.push(
    await run(undefined, {
      resume: [
        { interruptId: interrupt.id, status: "resolved", payload: { approved: true, approver: "alice" } },
      ],
    }),
  );
  report.messages = agent.messages;
  const session = report.runs[0].events[0].metadata.agenthost.session_id;
  report.session = session;
  report.whole = await read(session, [], report.runs.length);
  // Drop right after the first tool call's TOOL_CALL_START (a frame that is
  // not its journal event's last) and again a few frames later.
  const start = report.whole.frames.findIndex((f) => f.event.type === "TOOL_CALL_START");
  report.dropAt = [start + 1, start + 5];
  report.resumed = await read(session, report.dropAt, report.runs.length);
} catch (err) {
  report.error = String(err.stack ?? err);
}
process.stdout.write(JSON.stringify(report));
