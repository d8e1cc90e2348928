//! A connection's bounded queue of encoded frames.

use std::collections::VecDeque;

use bytes::Bytes;

/// One queued frame. Fan-out frames share their buffer across connections (`Bytes` clones
/// are reference counts), but each connection's budget is charged the full frame size.
#[derive(Clone, Debug)]
struct Queued {
    frame: Bytes,
    /// An ephemeral streaming event that may be dropped when the reader falls behind.
    droppable: bool,
}

/// Why a frame could not be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboxOverflow {
    /// Even after dropping every droppable frame, a durable frame does not fit the budget.
    DurableDoesNotFit,
}

/// A bounded FIFO of frames for one connection, in emit order.
///
/// Overflow policy: when a frame does not fit the byte budget, queued *droppable* frames
/// (ephemeral streaming deltas) are dropped oldest first and counted; if a durable frame still
/// does not fit, the push fails and the caller closes the connection. A droppable frame that
/// does not fit is dropped itself. Memory is thus bounded by the budget plus one frame.
#[derive(Debug)]
pub struct Outbox {
    queue: VecDeque<Queued>,
    queued_bytes: usize,
    budget: usize,
    dropped: u64,
    dropped_unreported: u64,
}

impl Outbox {
    /// An empty outbox with a byte budget.
    pub fn new(budget: usize) -> Self {
        Outbox {
            queue: VecDeque::new(),
            queued_bytes: 0,
            budget,
            dropped: 0,
            dropped_unreported: 0,
        }
    }

    /// Queues a frame. Returns whether the queue went from empty to non-empty.
    pub fn push(&mut self, frame: Bytes, droppable: bool) -> Result<bool, OutboxOverflow> {
        let was_empty = self.queue.is_empty();
        let len = frame.len();
        if self.queued_bytes + len > self.budget {
            self.drop_droppable(len);
        }
        // A single frame larger than the whole budget is still accepted into an empty queue,
        // so one big durable event never wedges a healthy connection.
        if self.queued_bytes + len > self.budget && !self.queue.is_empty() {
            if droppable {
                self.count_drop(1);
                return Ok(false);
            }
            return Err(OutboxOverflow::DurableDoesNotFit);
        }
        self.queued_bytes += len;
        self.queue.push_back(Queued { frame, droppable });
        Ok(was_empty)
    }

    fn drop_droppable(&mut self, need: usize) {
        let before = self.queue.len();
        let mut bytes = self.queued_bytes;
        let budget = self.budget;
        self.queue.retain(|q| {
            if bytes + need > budget && q.droppable {
                bytes -= q.frame.len();
                false
            } else {
                true
            }
        });
        self.queued_bytes = bytes;
        let dropped = (before - self.queue.len()) as u64;
        self.count_drop(dropped);
    }

    fn count_drop(&mut self, n: u64) {
        self.dropped += n;
        self.dropped_unreported += n;
    }

    /// Queues a connection's last frame (the reason it is being closed) whatever the budget:
    /// the budget bounds what a peer can pile up, and nothing follows this frame.
    pub fn push_final(&mut self, frame: Bytes) -> bool {
        let was_empty = self.queue.is_empty();
        self.queued_bytes += frame.len();
        self.queue.push_back(Queued {
            frame,
            droppable: false,
        });
        was_empty
    }

    /// The next frame to write.
    pub fn pop(&mut self) -> Option<Bytes> {
        let q = self.queue.pop_front()?;
        self.queued_bytes -= q.frame.len();
        Some(q.frame)
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Bytes currently queued.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Frames dropped so far because the reader fell behind.
    pub fn dropped_total(&self) -> u64 {
        self.dropped
    }

    /// Drops not yet reported to the client.
    pub fn unreported_drops(&self) -> u64 {
        self.dropped_unreported
    }

    /// Takes the count of drops not yet reported to the client.
    pub fn take_unreported_drops(&mut self) -> u64 {
        std::mem::take(&mut self.dropped_unreported)
    }

    /// Discards everything queued (the connection is going away).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.queued_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize) -> Bytes {
        Bytes::from(vec![b'x'; n])
    }

    #[test]
    fn fifo_and_budget_accounting() {
        let mut o = Outbox::new(100);
        assert_eq!(o.push(frame(10), false), Ok(true));
        assert_eq!(o.push(frame(20), false), Ok(false));
        assert_eq!(o.queued_bytes(), 30);
        assert_eq!(o.pop().unwrap().len(), 10);
        assert_eq!(o.pop().unwrap().len(), 20);
        assert!(o.pop().is_none());
        assert_eq!(o.queued_bytes(), 0);
    }

    #[test]
    fn drops_streaming_frames_before_refusing_durable_ones() {
        let mut o = Outbox::new(100);
        o.push(frame(40), false).unwrap();
        o.push(frame(30), true).unwrap();
        o.push(frame(20), true).unwrap();
        // 90 queued; a durable 50 needs both droppable frames gone.
        assert_eq!(o.push(frame(50), false), Ok(false));
        assert_eq!(o.dropped_total(), 2);
        assert_eq!(o.take_unreported_drops(), 2);
        assert_eq!(o.take_unreported_drops(), 0);
        assert_eq!(o.queued_bytes(), 90);
        // Nothing droppable left: a durable frame that does not fit is refused.
        assert_eq!(
            o.push(frame(20), false),
            Err(OutboxOverflow::DurableDoesNotFit)
        );
        // A droppable one is dropped.
        assert_eq!(o.push(frame(20), true), Ok(false));
        assert_eq!(o.dropped_total(), 3);
        assert!(o.queued_bytes() <= 100);
    }

    #[test]
    fn an_oversize_frame_fits_an_empty_queue() {
        let mut o = Outbox::new(10);
        assert_eq!(o.push(frame(50), false), Ok(true));
        assert_eq!(
            o.push(frame(1), false),
            Err(OutboxOverflow::DurableDoesNotFit)
        );
    }
}
