//! Server-Sent Events decoding for `send_events`: the `sse-stream` crate's
//! decoder over a stream of body chunks, yielding only the events that carry data.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Buf;
use futures_util::{Stream, TryStream};
use sse_stream::{Sse, SseByteStream};

/// One Server-Sent Event with data (blocks without a `data:` field, and
/// comments, are skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the block had one.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The `id:` field, if the block had one.
    pub id: Option<String>,
}

/// Decodes a stream of byte chunks (split anywhere) into events with data.
pub(crate) fn decode<S>(chunks: S) -> Events<S>
where
    S: TryStream,
{
    Events {
        inner: SseByteStream::new(chunks),
    }
}

/// The stream [`decode`] returns.
pub(crate) struct Events<S: TryStream> {
    inner: SseByteStream<S>,
}

impl<S> Stream for Events<S>
where
    S: TryStream + Unpin,
    S::Ok: Buf + Unpin,
    S::Error: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<SseEvent, sse_stream::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let block = match ready!(Pin::new(&mut self.inner).poll_next(cx)) {
                None => return Poll::Ready(None),
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                Some(Ok(block)) => block,
            };
            let Sse {
                event, data, id, ..
            } = block;
            if let Some(data) = data {
                return Poll::Ready(Some(Ok(SseEvent { event, data, id })));
            }
            // A block with metadata only (id, retry): nothing to hand over.
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::task::Waker;

    /// Decodes `chunks` (each one a read) synchronously: every chunk is
    /// already there, so the decoder never waits.
    pub(crate) fn decode_chunks(chunks: &[&'static [u8]]) -> Result<Vec<SseEvent>, String> {
        let stream = futures_util::stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<&'static [u8], std::io::Error>(*c))
                .collect::<Vec<_>>(),
        );
        let mut events = decode(stream);
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = Vec::new();
        loop {
            match Pin::new(&mut events).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(event))) => out.push(event),
                Poll::Ready(Some(Err(e))) => return Err(e.to_string()),
                Poll::Ready(None) => return Ok(out),
                Poll::Pending => unreachable!("an iterator stream is always ready"),
            }
        }
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn events_split_anywhere_across_reads_come_out_whole() {
        let whole: &'static [u8] = b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
        let expected = vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"];
        assert_eq!(data(&decode_chunks(&[whole]).unwrap()), expected);
        // Every split point, including inside `data:` and between \n and \n.
        for cut in 1..whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(
                data(&decode_chunks(&[a, b]).unwrap()),
                expected,
                "cut at {cut}"
            );
        }
        // One byte per read.
        let bytes: Vec<&'static [u8]> = (0..whole.len()).map(|i| &whole[i..i + 1]).collect();
        assert_eq!(data(&decode_chunks(&bytes).unwrap()), expected);
    }

    #[test]
    fn comments_multi_line_data_crlf_and_metadata_blocks() {
        let events = decode_chunks(&[
            b": keep-alive\n\n",
            b"event: note\r\nid: 7\r\ndata: line one\r\ndata: line two\r\n\r\n",
            b"retry: 1000\n\n",
            b"data:no space\n\n",
            b"data\n\n",
        ])
        .unwrap();
        assert_eq!(
            events[0],
            SseEvent {
                event: Some("note".into()),
                data: "line one\nline two".into(),
                id: Some("7".into()),
            }
        );
        assert_eq!(data(&events[1..]), vec!["no space", ""]);
    }

    #[test]
    fn an_unfinished_last_block_is_dropped_and_bad_utf8_is_an_error() {
        let events = decode_chunks(&[b"data: a\n\ndata: cut off"]).unwrap();
        assert_eq!(data(&events), vec!["a"]);
        assert!(decode_chunks(&[b"data: \xff\xfe\n\n"]).is_err());
    }
}
