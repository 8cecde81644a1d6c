//! Event ids on redb: a new event's id (a UUIDv7) carries its seq and takes
//! no entry in `EVENT_IDS`; events as older versions wrote them (a plain
//! UUIDv7 id, indexed; a version-8 id that carries its seq) still resolve;
//! ids resolve only within their session, a made-up id to nothing;
//! deleting a session removes its index entries.

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
    // seq 0 as the oldest versions wrote it (a plain UUIDv7, here one whose
    // counter bits happen to read as seq 1), seq 1 and 3 as this one does,
    // seq 2 as the version-8 layout of 2026-11 did.
    let ids = [
        Uuid::parse_str("01a216e8-ee99-7000-8000-000401234567").unwrap(),
        event_id(1),
        Uuid::parse_str("01a216e8-ee99-8000-8000-000adeadbeef").unwrap(),
        event_id(3),
    ];
    let mut writer = engine.write_engine().unwrap();
    writer
        .transact(&mut |tx| {
            for (seq, id) in ids.iter().enumerate() {
                assert_eq!(tx.event_id(seq as u64).get_version_num(), 7);
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
    assert_eq!(indexed(&engine), 1, "only the plain UUIDv7 id is indexed");
    for (seq, id) in ids.iter().enumerate() {
        assert_eq!(engine.event_seq(session, *id).unwrap(), Some(seq as u64));
        assert_eq!(engine.event_seq(Uuid::now_v7(), *id).unwrap(), None);
    }
    // An id of the right shape that no event has: seq 1's and 2's, one bit
    // off, and one whose seq has no event.
    for id in [ids[1], ids[2]] {
        let forged = Uuid::from_u128(id.as_u128() ^ 1);
        assert_eq!(engine.event_seq(session, forged).unwrap(), None);
    }
    assert_eq!(engine.event_seq(session, event_id(9)).unwrap(), None);

    writer
        .transact(&mut |tx| tx.delete_session(session))
        .unwrap();
    assert_eq!(indexed(&engine), 0);
    for id in ids {
        assert_eq!(engine.event_seq(session, id).unwrap(), None);
    }
}
