//! Event ids that carry their event's seq, so that a `Last-Event-ID`
//! resolves by `(session, seq)` with no index of ids (the embedded engine
//! writes them: one B-tree insert per event instead of two).
//!
//! The layout is an RFC 9562 UUIDv7 whose "fixed bit-length dedicated
//! counter" (§6.2, method 1) is the seq, most significant bits first:
//!
//! | bits | what |
//! |---|---|
//! | 48 | `unix_ts_ms`: Unix time in milliseconds, so ids sort by creation time |
//! | 4 | the version, 7 |
//! | 12 | `rand_a`: the seq's high 12 bits (of 40) |
//! | 2 | the variant, `0b10` |
//! | 28 | the top of `rand_b`: the seq's low 28 bits |
//! | 34 | the rest of `rand_b`: random |
//!
//! Within one millisecond a session's ids sort by seq. A seq past `MAX_SEQ`
//! gets a plain UUIDv7 instead (and an index entry). Any UUIDv7 decodes to
//! some seq, and ids of this layout from before (`LEGACY_VERSION`, the same
//! bits with version 8) to theirs: so an id is trusted only after the event
//! at its `(session, seq)` is found to have exactly this id, else it is
//! looked up in the index (older events, plain UUIDv7s), and a made-up one
//! resolves to nothing. The format is part of the stored journal: never
//! change it, add another.

use std::time::{SystemTime, UNIX_EPOCH};

use uuid::Uuid;

/// The largest seq an id can carry (40 bits).
const MAX_SEQ: u64 = (1 << 40) - 1;

const VERSION: u128 = 7;
/// The version the same layout had before it was a UUIDv7 (redb journals
/// written up to 2026-11 hold such ids): still read.
const LEGACY_VERSION: u128 = 8;
const VARIANT: u128 = 0b10;
const RANDOM_BITS: u32 = 34;

/// A fresh id for the event at `seq` of its session.
pub(crate) fn event_id(seq: u64) -> Uuid {
    if seq > MAX_SEQ {
        return Uuid::now_v7();
    }
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        & ((1 << 48) - 1);
    let random = rand::random::<u64>() & ((1 << RANDOM_BITS) - 1);
    Uuid::from_u128(
        (ms as u128) << 80
            | VERSION << 76
            | ((seq >> 28) as u128) << 64
            | VARIANT << 62
            | ((seq & ((1 << 28) - 1)) as u128) << RANDOM_BITS
            | random as u128,
    )
}

/// The seq an id of `event_id`'s layout (or its legacy version 8) would
/// carry; `None` for an id of any other version or variant. For a UUIDv7
/// it is only a candidate: check the event there has this id.
pub(crate) fn seq_of(id: Uuid) -> Option<u64> {
    let v = id.as_u128();
    let version = (v >> 76) & 0xf;
    if !(version == VERSION || version == LEGACY_VERSION) || (v >> 62) & 0b11 != VARIANT {
        return None;
    }
    let high = ((v >> 64) & 0xfff) as u64;
    let low = ((v >> RANDOM_BITS) & ((1 << 28) - 1)) as u64;
    Some(high << 28 | low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_carries_its_seq_and_is_a_uuidv7() {
        for seq in [0, 1, 27, (1 << 28) - 1, 1 << 28, 123_456_789_012, MAX_SEQ] {
            let id = event_id(seq);
            assert_eq!(seq_of(id), Some(seq), "{id}");
            assert_eq!(id.get_version_num(), 7, "{id}");
            assert_eq!(id.get_version(), Some(uuid::Version::SortRand));
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        }
        // The time comes first, as in any UUIDv7 made at the same moment.
        let (before, id) = (Uuid::now_v7(), event_id(5));
        let ms = |u: Uuid| u.as_u128() >> 80;
        assert!(ms(id) >= ms(before) && ms(id) <= ms(before) + 1000);
        // uuid's own reading of the timestamp agrees.
        let (secs, _) = id.get_timestamp().unwrap().to_unix();
        assert_eq!(secs, (ms(id) / 1000) as u64);
        // Within one millisecond, ids of one session sort by seq.
        let (a, b) = (event_id(41), event_id(42));
        if ms(a) == ms(b) {
            assert!(a < b);
        }
    }

    #[test]
    fn ids_of_the_legacy_version_8_layout_still_carry_their_seq() {
        // Written by the redb engine before ids became UUIDv7s (the code
        // of 2026-11-26) for seq 123 456 789 012 at one moment.
        let id: Uuid = "01a216e8-ee99-81cb-ba64-6852deadbeef".parse().unwrap();
        assert_eq!(id.get_version_num(), 8);
        assert_eq!(seq_of(id), Some(123_456_789_012));
        let first: Uuid = "01a216e8-ee99-8000-8000-0002deadbeef".parse().unwrap();
        assert_eq!(seq_of(first), Some(0));
    }

    #[test]
    fn other_ids_carry_no_seq() {
        assert_eq!(seq_of(Uuid::nil()), None);
        assert_eq!(
            seq_of(Uuid::from_u128(
                rand::random::<u128>() & !(0xf << 76) | 4 << 76
            )),
            None
        );
        assert_eq!(seq_of(Uuid::from_u128(0x4000 << 64 | 0b10 << 62)), None);
        // A UUIDv7 of another variant.
        assert_eq!(seq_of(Uuid::from_u128(0x7000 << 64)), None);
        // Too large a seq: a plain UUIDv7, whose counter bits are not the seq.
        let id = event_id(MAX_SEQ + 1);
        assert_eq!(id.get_version_num(), 7);
        assert_ne!(seq_of(id), Some(MAX_SEQ + 1));
        // Ids of the same seq differ (34 random bits).
        assert_ne!(event_id(3), event_id(3));
    }
}
