//! A waiting turn's ticket holds no input, and gets back exactly the one
//! its TURN_STARTED holds (and a resumed turn its call), for every way a
//! turn starts: a new session, an input, a queued input, a decision, and
//! a turn recovered at the next start.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::Parked;
use crate::store::test_calls::HostCalls;
use crate::store::tests::{deployed, open, suspend};
use crate::store::{
    By, Committed, Db, Decision, DecisionDetails, OnBusy, ToolCallRecord, TurnOutcome, TurnReason,
    TurnSink, TurnTicket, Writer,
};

/// The tickets the writer starts, as the runtime would get them.
#[derive(Default)]
struct Started(Mutex<Vec<(TurnTicket, Option<Committed>)>>);

impl TurnSink for Started {
    fn start(&self, ticket: TurnTicket, committed: Option<Committed>) {
        self.0.lock().unwrap().push((ticket, committed));
    }
}

impl Started {
    fn take(&self) -> (TurnTicket, Option<Committed>) {
        let mut started = self.0.lock().unwrap();
        assert_eq!(started.len(), 1, "one turn started");
        started.remove(0)
    }
}

/// Parks the ticket started last, checks it holds no input, and reads it
/// back: it must be the ticket as it came.
async fn round_trip(store: &Db, started: &Started) -> TurnTicket {
    let (ticket, committed) = started.take();
    let parked = Parked::park(ticket.clone());
    assert_eq!(parked.ticket().input, Value::Null);
    assert_eq!(parked.ticket().reason, TurnReason::Input);
    let back = parked.unpark(store, committed.as_ref()).await.unwrap();
    assert_eq!(
        (back.session_id, back.turn, back.started_seq),
        (ticket.session_id, ticket.turn, ticket.started_seq)
    );
    assert_eq!(back.input, ticket.input);
    assert_eq!(back.reason, ticket.reason);
    back
}

#[tokio::test]
async fn a_parked_ticket_drops_its_input_and_reads_the_exact_one_back() {
    let (_dir, store, writer) = open();
    let started = Arc::new(Started::default());
    writer.start_turns(started.clone());
    deployed(&writer).await;
    let big = json!({"text": "é".repeat(1 << 19), "n": 1});
    let (session, _) = writer
        .new_session("app".into(), "/chat".into(), big.clone())
        .await
        .unwrap();
    assert_eq!(round_trip(&store, &started).await.input, big);

    // A follow-up input, and one queued behind it.
    writer
        .finish_turn(session.id, 1, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    writer
        .next_input(session.id, json!("second"))
        .await
        .unwrap();
    assert_eq!(round_trip(&store, &started).await.input, json!("second"));
    let queued = writer
        .input(
            session.id,
            json!(["third"]),
            By::host(),
            OnBusy::Enqueue,
            None,
        )
        .await
        .unwrap();
    assert!(queued.work.is_some());
    writer
        .finish_turn(session.id, 2, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    let third = round_trip(&store, &started).await;
    assert_eq!((third.turn, third.input), (3, json!(["third"])));

    // A resumed turn: its input and its edited call come back.
    let call = ToolCallRecord {
        tool_call_id: "call_3_1".into(),
        name: "refund".into(),
        arguments: json!({"amount": 5}),
    };
    suspend(&writer, session.id, 3, call, json!(["third"])).await;
    let pending = store.session(session.id).unwrap().unwrap().pending_approval;
    let decision = Decision {
        approved: true,
        approver: "ann".into(),
        by: By::Platform { key_id: "k".into() },
        details: DecisionDetails {
            arguments: Some(json!({"amount": 3})),
            message: None,
            result: None,
            address_hash: None,
        },
        checked_seq: pending.map(|p| p.event_seq),
    };
    writer.decide_now(session.id, decision).await.unwrap();
    let resumed = round_trip(&store, &started).await;
    assert_eq!((resumed.turn, &resumed.input), (4, &json!(["third"])));
    let TurnReason::ApprovalDecision { pending, .. } = &resumed.reason else {
        panic!("a resumed turn");
    };
    assert_eq!(pending.call.arguments, json!({"amount": 3}));

    // A turn that left no trace starts again at the next start.
    writer
        .finish_turn(session.id, 4, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    writer.next_input(session.id, json!("fifth")).await.unwrap();
    let fifth = started.take().0;
    drop(writer);
    let writer = Writer::spawn(store.clone()).unwrap();
    writer.start_turns(started.clone());
    writer.recover().await.unwrap();
    let recovered = round_trip(&store, &started).await;
    assert_eq!((recovered.turn, recovered.input), (5, json!("fifth")));
    assert_eq!(recovered.started_seq, fifth.started_seq);

    // A ticket whose start is not where it says is refused, not guessed.
    let mut wrong = fifth;
    wrong.started_seq = 0;
    assert!(Parked::park(wrong).unpark(&store, None).await.is_err());
}
