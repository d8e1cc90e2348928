//! The driver's tasks: a reader and a writer per connection (started by [`attach_streams`],
//! which opens the connection), one timer ([`ensure_timer`]). A task that must stop
//! early (a writer blocked on a peer that stopped reading, the reader of a closing connection)
//! watches a flag of its connection rather than being aborted, so no executor-specific
//! cancellation is needed.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use futures_lite::future;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::debug;

use crate::clock::now;
use crate::shared::{forget, ConnState, Shared};
use crate::sync::{lock, Flag, Notify};
use crate::READ_CHUNK;

/// A writer takes at most about this many bytes of frames out of the host per lock.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// A reader starts with a buffer this small and doubles it (up to [`READ_CHUNK`]) whenever a
/// read fills it: an idle connection costs little memory, a busy one reads big chunks.
const READ_START: usize = 2 * 1024;

/// A writer keeps a coalescing buffer up to this size while its queue is empty; a bigger one
/// (grown by a burst) is freed, so an idle connection holds no write buffer.
const IDLE_WRITE_BUFFER: usize = 4 * 1024;

pub(crate) async fn reader_task<Rd>(shared: Arc<Shared>, state: Arc<ConnState>, mut reader: Rd)
where
    Rd: AsyncRead + Unpin,
{
    let mut buf = vec![0u8; READ_START.min(READ_CHUNK)];
    loop {
        if state.closing.is_set() {
            return;
        }
        let read = future::or(async { Some(reader.read(&mut buf).await) }, async {
            state.closing.wait().await;
            None
        })
        .await;
        match read {
            // Closing (or ended): stop reading; the writer flushes what is queued.
            None => return,
            Some(Ok(0)) => {
                // The peer finished sending; still write what is queued for it.
                shared.begin_close(&state, "end of input");
                return;
            }
            Some(Ok(n)) => {
                let bytes = &buf[..n];
                shared.with_inner(|inner, now| {
                    if inner.conns.contains_key(&state.id) {
                        inner.host.handle_bytes(now, state.id, bytes);
                    }
                });
                if n == buf.len() && buf.len() < READ_CHUNK {
                    buf.resize((buf.len() * 2).min(READ_CHUNK), 0);
                }
            }
            Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Some(Err(e)) => {
                debug!(conn = %state.id, error = %e, "read failed");
                shared.finish(&state);
                return;
            }
        }
    }
}

/// How a writer's run ended.
enum WriterEnd {
    /// Everything queued was written and the connection is closing: the host was told.
    Flushed,
    /// The connection was ended by another task (flush timeout, reader error).
    Ended,
    Failed(io::Error),
}

pub(crate) async fn writer_task<Wr>(shared: Arc<Shared>, state: Arc<ConnState>, writer: Wr)
where
    Wr: AsyncWrite + Unpin,
{
    let mut writer = writer;
    let mut batch: Vec<Bytes> = Vec::new();
    // Several frames are copied into one buffer and written with one call.
    let mut coalesced: Vec<u8> = Vec::new();
    let run = async {
        loop {
            let (ended, mark, drained) = shared.with_inner(|inner, now| {
                // Every queued frame up to the batch limit, with one host call.
                let taken = inner
                    .host
                    .poll_transmit_batch(state.id, WRITE_BATCH_BYTES, &mut batch);
                // Under the limit: the queue is empty now, and the next frame queued wakes
                // this writer (the queue's empty → non-empty transition).
                let drained = taken < WRITE_BATCH_BYTES;
                // Nothing left and closing: tell the host in the same critical section, so no
                // frame can be queued between the last check and `handle_eof`.
                if batch.is_empty() && state.closing.is_set() {
                    forget(inner, now, state.id, &shared.live);
                    return (true, None, drained);
                }
                // Every event in these frames was appended up to this mark (`every-event`, or a
                // shared log's acknowledgements).
                let mark = match batch.is_empty() {
                    true => None,
                    false => inner.durability_mark(),
                };
                // A connection the host already forgot (ended elsewhere) has nothing to write.
                (
                    batch.is_empty() && !inner.conns.contains_key(&state.id),
                    mark,
                    drained,
                )
            });
            if ended {
                return WriterEnd::Flushed;
            }
            if batch.is_empty() {
                state.wake.notified().await;
                continue;
            }
            if let (Some(mark), Some(synced)) = (mark, &shared.synced) {
                // Hold the frames until their events are durable; other connections go on.
                synced.wait_for(|s| *s >= mark).await;
            }
            // Nothing goes out once a cluster node's lease may have expired.
            shared
                .release_until
                .wait_for(|d| d.is_none_or(|d| std::time::Instant::now() < d))
                .await;
            let written = match batch.as_slice() {
                [frame] => writer.write_all(frame).await,
                frames => {
                    coalesced.clear();
                    for frame in frames {
                        coalesced.extend_from_slice(frame);
                    }
                    writer.write_all(&coalesced).await
                }
            };
            batch.clear();
            if let Err(e) = written {
                return WriterEnd::Failed(e);
            }
            if let Err(e) = writer.flush().await {
                return WriterEnd::Failed(e);
            }
            if drained && coalesced.capacity() > IDLE_WRITE_BUFFER {
                coalesced = Vec::new();
            }
            // Nothing was left behind: sleep until woken (new frames, closing) instead of
            // taking the lock once more to find the queue empty. Not once closing: the wake
            // that said so was spent on this batch, so look again and end.
            if drained && !state.closing.is_set() {
                state.wake.notified().await;
            }
        }
    };
    // A writer blocked on a peer that stopped reading is released when the connection ends.
    let end = future::or(run, async {
        state.done.wait().await;
        WriterEnd::Ended
    })
    .await;
    match end {
        WriterEnd::Flushed => {
            let farewell = lock(&state.farewell).take();
            let limit = shared.options.flush_timeout;
            let _ = shared
                .timeout(limit, async {
                    if let Some(frame) = farewell {
                        writer.write_all(&frame).await?;
                        writer.flush().await?;
                    }
                    writer.close().await
                })
                .await;
            shared.finished(&state);
        }
        WriterEnd::Ended => {}
        WriterEnd::Failed(e) => {
            debug!(conn = %state.id, error = %e, "write failed");
            shared.finish(&state);
        }
    }
}

pub(crate) async fn timer_task(shared: Weak<Shared>, wake: Arc<Notify>) {
    loop {
        let deadline = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let mut inner = shared.lock();
            inner.armed = inner.host.poll_timeout();
            inner.armed
        };
        let Some(deadline) = deadline else {
            wake.notified().await;
            continue;
        };
        let delay = deadline.saturating_duration_since(now());
        if delay.is_zero() {
            // Already due: fire now, after a yield. Not through the runtime's timer (tokio's
            // fires at its next 1 ms tick), and not without yielding, or an agent that yields
            // with zero-length timers (stream step batches) would keep this task running and
            // starve the writers on the same executor thread.
            let Some(yielding) = shared.upgrade().map(|s| s.yield_now()) else {
                return;
            };
            yielding.await;
        } else {
            let Some(sleep) = shared.upgrade().map(|s| s.sleep(delay)) else {
                return;
            };
            let fired = future::or(
                async {
                    sleep.await;
                    true
                },
                async {
                    wake.notified().await;
                    false
                },
            )
            .await;
            if !fired {
                continue;
            }
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.with_inner(|inner, now| inner.host.handle_timeout(now));
    }
}

/// Opens a host connection over `reader`/`writer` and starts its reader and writer tasks.
pub(crate) fn attach_streams<Rd, Wr>(shared: &Arc<Shared>, reader: Rd, writer: Wr) -> Arc<ConnState>
where
    Rd: AsyncRead + Unpin + Send + 'static,
    Wr: AsyncWrite + Unpin + Send + 'static,
{
    let (dialect, framing) = (shared.options.dialect, shared.options.framing);
    attach_streams_with(shared, dialect, framing, reader, writer)
}

/// [`attach_streams`] for a connection speaking `dialect` over `framing`.
pub(crate) fn attach_streams_with<Rd, Wr>(
    shared: &Arc<Shared>,
    dialect: agentwire::host::Dialect,
    framing: agentwire::Framing,
    reader: Rd,
    writer: Wr,
) -> Arc<ConnState>
where
    Rd: AsyncRead + Unpin + Send + 'static,
    Wr: AsyncWrite + Unpin + Send + 'static,
{
    ensure_timer(shared);
    let (state, shutting_down) = shared.with_inner(|inner, now| {
        let id = inner.host.open_with(now, dialect, framing);
        let farewell = inner
            .farewell
            .as_deref()
            .and_then(|reason| crate::farewell::farewell(dialect, framing, reason));
        let state = Arc::new(ConnState {
            id,
            wake: Notify::new(),
            closing: Flag::new(),
            done: Flag::new(),
            farewell: Mutex::new(farewell),
            dialect,
            framing,
        });
        inner.conns.insert(id, state.clone());
        shared.live.set(inner.conns.len());
        shared.unfinished.update(|n| *n += 1);
        (state, inner.shutting_down)
    });
    debug!(conn = %state.id, "connection opened");
    shared.spawn(reader_task(shared.clone(), state.clone(), reader));
    shared.spawn(writer_task(shared.clone(), state.clone(), writer));
    if shutting_down {
        shared.begin_close(&state, "server is shutting down");
    }
    state
}

/// Starts the timer task once.
pub(crate) fn ensure_timer(shared: &Arc<Shared>) {
    if !shared.timer_started.swap(true, Ordering::SeqCst) {
        shared.spawn(timer_task(Arc::downgrade(shared), shared.timer.clone()));
    }
}
