//! ops: a deterministic agent on `/ops` that shows gated tools. It keeps a
//! list of records in the session's journal, never in memory: the records are
//! rebuilt each turn from the `TOOL_RESULT` events with status `ok` (an
//! `add_record` adds `output.added`, a `delete_record` removes `output.deleted`).
//!
//! Tools (each takes `{"name": "<name>"}`):
//! - `add_record`: safe; returns `{"added": name}`.
//! - `delete_record`: gated in code (`needs_approval`); returns
//!   `{"deleted": name}`, or fails with `no such record`.
//! - `archive_record`: not gated in code (gate it in the manifest or the
//!   operator policy); returns `{"archived": name}`; does not change the records.
//!
//! Commands (the input is a JSON string or `{"text": ...}`; words are split on
//! whitespace, command words are lowercase, names are kept as typed). Each
//! command with tools is one step, handed over with the reason
//! `the user asked to <add|delete> <n1> and <n2>...`, `the user asked to
//! archive <n>`, or `the user asked to add <a> and delete <b>`:
//! - `add <name>...`: one `add_record` call per name;
//! - `delete <name>...`: one `delete_record` call per name (two names make
//!   two gated calls in one step: the host fails the turn);
//! - `archive <name>`: one `archive_record` call;
//! - `mixed <a> <b>`: `[add_record(a), delete_record(b)]`;
//! - `list`: no tools.
//!
//! A step that needs approval suspends the turn with no message. After a step
//! ran (in the same turn, or in the turn resumed by the decision, where the
//! SDK runs the suspended step before `handle`, which then runs nothing
//! else), the agent says one message: a sentence per call in step order,
//! then the records, all joined by one space:
//! - ok: `Added <name>.` / `Deleted <name>.` / `Archived <name>.`
//! - error: `Could not <add|delete|archive> <name>: <error>.` (e.g.
//!   `Could not delete ghost: no such record.`)
//! - denied: `The <addition|deletion|archiving> of <name> was denied by <approver>.`
//!   (with the decision's message: `... denied by <approver>: <message>.`)
//! - then `Records: <r1>, <r2>.` (in the order first added; a name is listed
//!   once), or `Records: none.`
//!
//! E.g. `Added apples. Added pears. Records: apples, pears.`,
//! `Deleted apples. Records: pears.`,
//! `The deletion of apples was denied by alice. Records: apples, pears.`,
//! `Archived x. Records: none.`.
//! `list` says only the records line. Any other input gets
//! `Usage: add <name>..., delete <name>..., archive <name>, mixed <a> <b>, list.`

use agenthost_sdk::serde_json::{Value, json};
use agenthost_sdk::{Agent, Error, Setup, ToolCall, ToolResult, ToolStatus, Turn};

const USAGE: &str = "Usage: add <name>..., delete <name>..., archive <name>, mixed <a> <b>, list.";

struct Ops;

impl Agent for Ops {
    fn setup(agent: &mut Setup) {
        agent.route("/ops");
        let name = json!({"name": {"type": "string"}});
        let schema = json!({"type": "object", "properties": name, "required": ["name"]});
        agent.tool("add_record", "Adds a record.", schema.clone(), add_record);
        let delete = agent.tool(
            "delete_record",
            "Deletes a record.",
            schema.clone(),
            delete_record,
        );
        delete.needs_approval();
        agent.tool(
            "archive_record",
            "Archives a record.",
            schema,
            archive_record,
        );
    }

    fn handle(turn: &mut Turn) -> Result<(), Error> {
        // On a turn resumed by a decision, the SDK has run the suspended
        // step (and only that) before `handle`: say how it went.
        if let (Some(results), Some(decision)) = (turn.resumed(), turn.decision()) {
            return summarise(turn, &decision.step, results);
        }
        let text = turn.input_text().unwrap_or_default().to_owned();
        let words: Vec<&str> = text.split_whitespace().collect();
        let call = |tool: &str, name: &&str| ToolCall::new(tool, json!({"name": name}));
        let (calls, reason) = match words.as_slice() {
            ["list"] => return turn.say(&records_line(&records(turn)?)),
            [verb @ ("add" | "delete"), names @ ..] if !names.is_empty() => (
                names
                    .iter()
                    .map(|n| call(&format!("{verb}_record"), n))
                    .collect(),
                format!("the user asked to {verb} {}", names.join(" and ")),
            ),
            ["archive", name] => (
                vec![call("archive_record", name)],
                format!("the user asked to archive {name}"),
            ),
            ["mixed", a, b] => (
                vec![call("add_record", a), call("delete_record", b)],
                format!("the user asked to add {a} and delete {b}"),
            ),
            _ => return turn.say(USAGE),
        };
        // Suspension (`ToolApprovalRequired`) propagates: the turn ends cleanly.
        let results = turn.run_tools_with_reason(calls.clone(), &reason)?;
        summarise(turn, &calls, &results)
    }
}

/// One message: a sentence per call (in step order), then the records.
fn summarise(turn: &Turn, calls: &[ToolCall], results: &[ToolResult]) -> Result<(), Error> {
    let approver = turn.decision().map_or("", |d| d.approver.as_str());
    let message = turn.decision().and_then(|d| d.message.as_deref());
    let mut sentences: Vec<String> = (calls.iter().zip(results))
        .map(|(call, result)| sentence(call, result, approver, message))
        .collect();
    sentences.push(records_line(&records(turn)?));
    turn.say(&sentences.join(" "))
}

fn sentence(call: &ToolCall, result: &ToolResult, approver: &str, message: Option<&str>) -> String {
    let name = call.arguments["name"].as_str().unwrap_or("?");
    let (verb, noun, done) = match result.name.as_str() {
        "add_record" => ("add", "addition", "Added"),
        "delete_record" => ("delete", "deletion", "Deleted"),
        _ => ("archive", "archiving", "Archived"),
    };
    match result.status {
        ToolStatus::Ok => format!("{done} {name}."),
        ToolStatus::Error => {
            let error = result.output.as_str().unwrap_or("error");
            format!("Could not {verb} {name}: {error}.")
        }
        ToolStatus::Denied => match message {
            Some(why) => format!("The {noun} of {name} was denied by {approver}: {why}."),
            None => format!("The {noun} of {name} was denied by {approver}."),
        },
    }
}

fn records_line(records: &[String]) -> String {
    match records.is_empty() {
        true => "Records: none.".to_owned(),
        false => format!("Records: {}.", records.join(", ")),
    }
}

/// The records, rebuilt from the journal's successful `TOOL_RESULT`s.
fn records(turn: &Turn) -> Result<Vec<String>, Error> {
    let mut records: Vec<String> = Vec::new();
    for event in turn.history() {
        let event = event?;
        let payload = event.payload;
        if event.event_type != "TOOL_RESULT" || payload["status"] != "ok" {
            continue; // failed and denied calls change nothing
        }
        let output = &payload["output"];
        match (
            payload["name"].as_str(),
            output["added"].as_str(),
            output["deleted"].as_str(),
        ) {
            (Some("add_record"), Some(name), _) if !records.iter().any(|r| r == name) => {
                records.push(name.to_owned())
            }
            (Some("delete_record"), _, Some(name)) => records.retain(|r| r != name),
            _ => {}
        }
    }
    Ok(records)
}

fn name_of(args: &Value) -> Result<String, String> {
    args["name"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "missing name".to_owned())
}

fn add_record(_: &mut Turn, args: Value) -> Result<Value, String> {
    Ok(json!({"added": name_of(&args)?}))
}

fn delete_record(turn: &mut Turn, args: Value) -> Result<Value, String> {
    let name = name_of(&args)?;
    if !records(turn)?.contains(&name) {
        return Err("no such record".to_owned());
    }
    Ok(json!({"deleted": name}))
}

fn archive_record(_: &mut Turn, args: Value) -> Result<Value, String> {
    Ok(json!({"archived": name_of(&args)?}))
}

agenthost_sdk::export_agent!(Ops);
