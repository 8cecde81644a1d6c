//! Event ids on redb: a new event's id carries its seq and takes no entry
//! in `EVENT_IDS`; an event as older versions wrote every one (a UUIDv7
//! id, indexed) still resolves; ids resolve only within their session, a
//! made-up id to nothing; deleting a session removes its index entries.

use redb::{ReadableDatabase, ReadableTableMetadata};
use uuid::Uuid;

use super::{RedbEngine, RedbOptions, tables};
use crate::journal::{EventType, NewEvent, encode_record, event_id};
use crate::store::engine::{Engine, EventRow};

fn indexed(engine: &RedbEngine) -> u64 {
    let txn = engine.db.begin_read().unwrap();
    txn.open_table(tables::EVENT_IDS).unwrap().len().unwrap()
}

#[test]
fn ids_that_carry_their_seq_and_older_indexed_ids_both_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let engine = RedbEngine::open(&dir.path().join("db.redb"), RedbOptions::default()).unwrap();
    let session = Uuid::now_v7();
    // seq 0 as an older version wrote it, seq 1 and 2 as this one does.
    let ids = [Uuid::now_v7(), event_id(1), event_id(2)];
    let mut writer = engine.write_engine().unwrap();
    writer
        .transact(&mut |tx| {
            for (seq, id) in ids.iter().enumerate() {
                assert_eq!(tx.event_id(seq as u64).get_version_num(), 8);
                let event = NewEvent::untyped(EventType::TurnEnded, serde_json::json!({}));
                let (record, _) = encode_record(*id, seq as u64, session, &event, "now");
                tx.insert_event(EventRow {
                    session,
                    seq: seq as u64,
                    id: *id,
                    event_type: "TURN_ENDED",
                    record: &record,
                })?;
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(indexed(&engine), 1, "only the UUIDv7 id is indexed");
    for (seq, id) in ids.iter().enumerate() {
        assert_eq!(engine.event_seq(session, *id).unwrap(), Some(seq as u64));
        assert_eq!(engine.event_seq(Uuid::now_v7(), *id).unwrap(), None);
    }
    // An id of the right shape that no event has: seq 2's, one bit off,
    // and one whose seq has no event.
    let forged = Uuid::from_u128(ids[2].as_u128() ^ 1);
    assert_eq!(engine.event_seq(session, forged).unwrap(), None);
    assert_eq!(engine.event_seq(session, event_id(9)).unwrap(), None);

    writer
        .transact(&mut |tx| tx.delete_session(session))
        .unwrap();
    assert_eq!(indexed(&engine), 0);
    for id in ids {
        assert_eq!(engine.event_seq(session, id).unwrap(), None);
    }
}
