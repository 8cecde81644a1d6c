//! The approvals feed in the redb file: entries by seq, a per-session index
//! for deletions, and the marks (`head`, `purged_through`). The one writer
//! gives seqs, so their order is the commit order.

use std::time::SystemTime;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::{storage, tables};
use crate::store::engine::{FeedItem, FeedPage, FeedRow};
use crate::store::{StoreError, unix_ms};

const HEAD: &str = "head";
const PURGED: &str = "purged_through";
/// Entries of other apps looked at per read before the reader is told to
/// come back (`FeedPage::read_through`).
const SCAN: usize = 4096;

/// `WriteTx::append_feed`.
pub(super) fn append(txn: &WriteTransaction, rows: &[FeedRow]) -> Result<u64, StoreError> {
    let mut marks = txn
        .open_table(tables::APPROVAL_FEED_MARKS)
        .map_err(storage)?;
    let mut head = marks.get(HEAD).map_err(storage)?.map_or(0, |v| v.value());
    let mut feed = txn.open_table(tables::APPROVAL_FEED).map_err(storage)?;
    let mut by_session = (txn.open_table(tables::APPROVAL_FEED_SESSIONS)).map_err(storage)?;
    let now = unix_ms(SystemTime::now());
    for row in rows {
        head += 1;
        let (session, app) = (row.session.as_u128(), row.app.as_u128());
        (feed.insert(head, (now, session, app, row.json.as_str()))).map_err(storage)?;
        by_session.insert((session, head), ()).map_err(storage)?;
    }
    marks.insert(HEAD, head).map_err(storage)?;
    Ok(head)
}

/// `WriteTx::purge_feed`.
pub(super) fn purge(
    txn: &WriteTransaction,
    before_ms: u64,
    limit: usize,
) -> Result<usize, StoreError> {
    let mut feed = txn.open_table(tables::APPROVAL_FEED).map_err(storage)?;
    let mut old = Vec::new();
    for row in feed.iter().map_err(storage)? {
        let (seq, value) = row.map_err(storage)?;
        let (at, session, ..) = value.value();
        if at >= before_ms || old.len() == limit {
            break;
        }
        old.push((seq.value(), session));
    }
    let Some(&(last, _)) = old.last() else {
        return Ok(0);
    };
    let mut by_session = (txn.open_table(tables::APPROVAL_FEED_SESSIONS)).map_err(storage)?;
    for (seq, session) in &old {
        feed.remove(seq).map_err(storage)?;
        by_session.remove((*session, *seq)).map_err(storage)?;
    }
    let mut marks = txn
        .open_table(tables::APPROVAL_FEED_MARKS)
        .map_err(storage)?;
    let purged = marks.get(PURGED).map_err(storage)?.map_or(0, |v| v.value());
    marks.insert(PURGED, purged.max(last)).map_err(storage)?;
    Ok(old.len())
}

/// Removes a deleted session's entries.
pub(super) fn delete_session(txn: &WriteTransaction, session: Uuid) -> Result<(), StoreError> {
    let key = session.as_u128();
    let mut by_session = (txn.open_table(tables::APPROVAL_FEED_SESSIONS)).map_err(storage)?;
    let mut seqs = Vec::new();
    for row in by_session
        .range((key, 0)..=(key, u64::MAX))
        .map_err(storage)?
    {
        seqs.push(row.map_err(storage)?.0.value().1);
    }
    if seqs.is_empty() {
        return Ok(());
    }
    let mut feed = txn.open_table(tables::APPROVAL_FEED).map_err(storage)?;
    for seq in seqs {
        feed.remove(seq).map_err(storage)?;
        by_session.remove((key, seq)).map_err(storage)?;
    }
    Ok(())
}

/// The feed's head as of `txn`.
pub(super) fn head(txn: &ReadTransaction) -> Result<u64, StoreError> {
    let marks = txn
        .open_table(tables::APPROVAL_FEED_MARKS)
        .map_err(storage)?;
    Ok(marks.get(HEAD).map_err(storage)?.map_or(0, |v| v.value()))
}

/// `Engine::approval_feed`, inside one read transaction.
pub(super) fn read(
    txn: &ReadTransaction,
    after: u64,
    app: Option<Uuid>,
    limit: usize,
) -> Result<FeedPage, StoreError> {
    let marks = txn
        .open_table(tables::APPROVAL_FEED_MARKS)
        .map_err(storage)?;
    let mark = |name| -> Result<u64, StoreError> {
        Ok(marks.get(name).map_err(storage)?.map_or(0, |v| v.value()))
    };
    let (head, purged_through) = (mark(HEAD)?, mark(PURGED)?);
    let feed = txn.open_table(tables::APPROVAL_FEED).map_err(storage)?;
    let mut page = FeedPage {
        head,
        purged_through,
        items: Vec::new(),
        read_through: head.max(after),
    };
    let app = app.map(|id| id.as_u128());
    let mut scanned = 0;
    for row in feed.range(after.saturating_add(1)..).map_err(storage)? {
        let (seq, value) = row.map_err(storage)?;
        let (seq, (_, _, entry_app, json)) = (seq.value(), value.value());
        scanned += 1;
        if app.is_none_or(|app| app == entry_app) {
            page.items.push(FeedItem {
                seq,
                json: json.to_string(),
            });
        }
        if page.items.len() == limit || scanned == SCAN {
            page.read_through = seq;
            break;
        }
    }
    Ok(page)
}
