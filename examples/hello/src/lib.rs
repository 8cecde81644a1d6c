//! hello: a deterministic chat agent on `/chat` that echoes its input word by
//! word, remembers, through the session's journal, what was said before, and
//! says whom it serves (the session's end user) when asked "who am i".

use agenthost_sdk::serde_json::{Value, json};
use agenthost_sdk::{Agent, Error, Role, Setup, Turn};

struct Hello;

impl Agent for Hello {
    fn setup(agent: &mut Setup) {
        agent.route("/chat");
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        agent.tool(
            "word_count",
            "Counts the words of `text`.",
            schema,
            word_count,
        );
    }

    fn handle(turn: &mut Turn) -> Result<(), Error> {
        let input = turn.input_text().ok_or("send text as the input")?;
        // The rule: an input that starts with "what did I say" (in any case)
        // is answered from the journal instead of echoed.
        if input.to_lowercase().starts_with("what did i say") {
            return recall(turn);
        }
        // And an input of exactly "who am i" is answered with the end user.
        if input == "who am i" {
            return whoami(turn);
        }
        let mut reply = turn.message()?;
        reply.write("You said:")?;
        for word in input.split_whitespace() {
            reply.write(&format!(" {word}"))?;
        }
        reply.finish()
    }
}

/// Answers with the user's messages of earlier turns, oldest first.
fn recall(turn: &Turn) -> Result<(), Error> {
    let messages = turn.history().messages()?;
    let mut said: Vec<String> = (messages.into_iter())
        .filter(|message| message.role == Role::User)
        .map(|message| format!("{:?}", message.text))
        .collect();
    said.pop(); // the last one is this very question
    if said.is_empty() {
        return turn.say("You have not said anything before.");
    }
    turn.say(&format!("Before, you said: {}", said.join(", ")))
}

/// Answers with the session's end user and their email claim, if any.
fn whoami(turn: &Turn) -> Result<(), Error> {
    let Some(user) = turn.end_user()? else {
        return turn.say("You are anonymous.");
    };
    let email = user.claims.get("email").and_then(Value::as_str);
    turn.say(&format!(
        "You are {} ({}).",
        user.id,
        email.unwrap_or("no email")
    ))
}

fn word_count(_: &mut Turn, args: Value) -> Result<usize, String> {
    Ok(args["text"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .count())
}

agenthost_sdk::export_agent!(Hello);
