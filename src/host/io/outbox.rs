//! A connection's bounded queue of encoded frames, and the table of frames shared by many
//! connections' queues.

use std::collections::VecDeque;

use bytes::Bytes;

/// A frame queued on many connections (an event fanned out to a session's connections, a
/// `session.lifecycle` notification to all), stored once in [`SharedFrames`].
///
/// Queuing one on a connection bumps a plain counter in the table instead of cloning a
/// `Bytes` (an atomic reference count): the host is single-threaded, so a fan-out to N
/// connections costs N counter increments. The frame becomes a `Bytes` again when a
/// connection's frames are taken ([`Outbox::pop`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedFrame {
    index: u32,
    len: usize,
}

impl SharedFrame {
    /// The frame's size in bytes.
    pub fn len(self) -> usize {
        self.len
    }

    /// Whether the frame is empty.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }
}

/// One stored shared frame and how many queued entries refer to it.
#[derive(Debug)]
struct SharedSlot {
    frame: Bytes,
    refs: u32,
}

/// The frames queued on several connections at once, each stored once with a count of the
/// queued entries that refer to it. A frame is released when its last entry is taken,
/// dropped or cleared.
#[derive(Debug, Default)]
pub struct SharedFrames {
    slots: Vec<SharedSlot>,
    free: Vec<u32>,
}

impl SharedFrames {
    /// Stores `frame`, not yet queued anywhere: queue it with [`Outbox::push_shared`], then
    /// call [`SharedFrames::settle`] (which frees it if no outbox took it).
    pub fn insert(&mut self, frame: Bytes) -> SharedFrame {
        let len = frame.len();
        let slot = SharedSlot { frame, refs: 0 };
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index as usize] = slot;
                index
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 shared frames")
            }
        };
        SharedFrame { index, len }
    }

    /// Frees `frame` if no outbox holds it (call once, after queuing it).
    pub fn settle(&mut self, frame: SharedFrame) {
        if self.slots[frame.index as usize].refs == 0 {
            self.free_slot(frame.index);
        }
    }

    /// Stores `frame` with one reference held by the caller (not by an outbox): the frame
    /// stays stored, and may be [`SharedFrames::replace`]d, until [`SharedFrames::let_go`].
    pub fn insert_held(&mut self, frame: Bytes) -> SharedFrame {
        let frame = self.insert(frame);
        self.retain(frame.index);
        frame
    }

    /// Gives up the caller's reference taken by [`SharedFrames::insert_held`].
    pub fn let_go(&mut self, frame: SharedFrame) {
        self.release(frame.index);
    }

    /// Replaces the bytes of a held frame: every queued entry that refers to it, on every
    /// outbox, now sends `bytes`. Each entry stays charged to its outbox's budget at the
    /// size it had when queued. Returns the frame with its new size.
    pub fn replace(&mut self, frame: SharedFrame, bytes: Bytes) -> SharedFrame {
        let len = bytes.len();
        self.slots[frame.index as usize].frame = bytes;
        SharedFrame {
            index: frame.index,
            len,
        }
    }

    /// How many references `frame` has (queued entries, plus the caller's if held).
    pub fn holders(&self, frame: SharedFrame) -> u32 {
        self.slots[frame.index as usize].refs
    }

    /// Shared frames currently stored (queued somewhere).
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether no shared frame is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn retain(&mut self, index: u32) {
        self.slots[index as usize].refs += 1;
    }

    fn release(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        slot.refs -= 1;
        if slot.refs == 0 {
            self.free_slot(index);
        }
    }

    /// The frame for one entry that is taken: the last taker gets the stored `Bytes` itself.
    #[inline]
    fn take(&mut self, index: u32) -> Bytes {
        let slot = &mut self.slots[index as usize];
        slot.refs -= 1;
        if slot.refs == 0 {
            let frame = std::mem::take(&mut slot.frame);
            self.free.push(index);
            frame
        } else {
            slot.frame.clone()
        }
    }

    fn free_slot(&mut self, index: u32) {
        // `Bytes::new()` does not allocate.
        self.slots[index as usize].frame = Bytes::new();
        self.free.push(index);
    }
}

/// A queued frame: owned by this connection, or shared with others.
#[derive(Debug)]
enum Frame {
    Own(Bytes),
    Shared(SharedFrame),
}

impl Frame {
    #[inline]
    fn len(&self) -> usize {
        match self {
            Frame::Own(bytes) => bytes.len(),
            Frame::Shared(shared) => shared.len,
        }
    }

    #[inline]
    fn into_bytes(self, shared: &mut SharedFrames) -> Bytes {
        match self {
            Frame::Own(bytes) => bytes,
            Frame::Shared(frame) => shared.take(frame.index),
        }
    }

    fn discard(&self, shared: &mut SharedFrames) {
        if let Frame::Shared(frame) = self {
            shared.release(frame.index);
        }
    }
}

/// One queued frame. Fan-out frames are stored once ([`SharedFrames`]), but each
/// connection's budget is charged the full frame size.
#[derive(Debug)]
struct Queued {
    frame: Frame,
    /// An ephemeral streaming event that may be dropped when the reader falls behind.
    droppable: bool,
    /// A shared frame that stands for the latest state of something: queued at most once
    /// per outbox until it is taken ([`Outbox::push_latest`]).
    latest: bool,
}

/// Why a frame could not be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboxOverflow {
    /// Even after dropping every droppable frame, a durable frame does not fit the budget.
    DurableDoesNotFit,
}

/// Streaming frames a connection lost and was not told of yet
/// ([`Outbox::take_unreported_drops`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drops {
    /// How many.
    pub count: u64,
    /// Of those, how many were lost before they reached the queue (a cluster gateway's
    /// broken link to the session's owner) rather than dropped because the reader fell behind.
    pub lost_upstream: u64,
}

/// A bounded FIFO of frames for one connection, in emit order.
///
/// Overflow policy: when a frame does not fit the byte budget, queued *droppable* frames
/// (ephemeral streaming deltas) are dropped oldest first and counted; if a durable frame still
/// does not fit, the push fails and the caller closes the connection. A droppable frame that
/// does not fit is dropped itself. Memory is thus bounded by the budget plus one frame.
///
/// Frames shared with other connections live in a `SharedFrames` table passed to every
/// call that may queue, take or drop one; an outbox must be [`Outbox::clear`]ed with that
/// table before it is dropped, or its shared frames are never freed.
#[derive(Debug)]
pub struct Outbox {
    queue: VecDeque<Queued>,
    queued_bytes: usize,
    budget: usize,
    dropped: u64,
    dropped_unreported: u64,
    /// Of `dropped_unreported`, the frames lost before they reached this queue
    /// ([`Outbox::count_lost`]).
    lost_unreported: u64,
    /// The shared frames queued with [`Outbox::push_latest`] and not taken yet, sorted (a
    /// sorted `Vec`: usually empty or one long, searched in O(log n) when many sessions'
    /// updates wait; it keeps its capacity, so a steady stream allocates nothing).
    latest: Vec<u32>,
    /// Latest-state frames about something this connection does not follow (e.g. another
    /// session's metadata), queued with [`Outbox::push_latest_background`]: written only when
    /// `queue` is empty, so they never delay the connection's own frames, and coalesced for
    /// as long as they wait. [`Outbox::promote_background`] moves them to the end of `queue`.
    background: VecDeque<Queued>,
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
            lost_unreported: 0,
            latest: Vec::new(),
            background: VecDeque::new(),
        }
    }

    /// Queues a frame of this connection's own. Returns whether the queue went from empty
    /// to non-empty.
    #[inline]
    pub fn push(
        &mut self,
        frame: Bytes,
        droppable: bool,
        shared: &mut SharedFrames,
    ) -> Result<bool, OutboxOverflow> {
        self.push_frame(Frame::Own(frame), droppable, false, shared)
    }

    /// Queues a frame stored in `shared` (see `SharedFrame`). Returns whether the queue
    /// went from empty to non-empty.
    #[inline]
    pub fn push_shared(
        &mut self,
        frame: SharedFrame,
        droppable: bool,
        shared: &mut SharedFrames,
    ) -> Result<bool, OutboxOverflow> {
        self.push_frame(Frame::Shared(frame), droppable, false, shared)
    }

    /// Queues a durable shared frame that stands for the latest state of something (kept
    /// current with [`SharedFrames::replace`]), unless this outbox already has it queued and
    /// not taken: then nothing is queued, and the entry already queued, at its place, sends
    /// whatever the frame holds when it is taken. Returns whether the queue went from empty
    /// to non-empty.
    pub fn push_latest(
        &mut self,
        frame: SharedFrame,
        shared: &mut SharedFrames,
    ) -> Result<bool, OutboxOverflow> {
        let Err(at) = self.latest.binary_search(&frame.index) else {
            return Ok(false);
        };
        let became_ready = self.push_frame(Frame::Shared(frame), false, true, shared)?;
        self.latest.insert(at, frame.index);
        Ok(became_ready)
    }

    /// [`Outbox::push_latest`] into the background lane: the frame is written once nothing
    /// else is queued (frames of the background lane keep their order among themselves).
    /// Returns whether the outbox went from empty to non-empty.
    pub fn push_latest_background(
        &mut self,
        frame: SharedFrame,
        shared: &mut SharedFrames,
    ) -> Result<bool, OutboxOverflow> {
        let Err(at) = self.latest.binary_search(&frame.index) else {
            return Ok(false);
        };
        let was_empty = self.is_empty();
        let len = frame.len();
        if self.queued_bytes + len > self.budget {
            self.drop_droppable(len, shared);
            if self.queued_bytes + len > self.budget && !self.is_empty() {
                return Err(OutboxOverflow::DurableDoesNotFit);
            }
        }
        shared.retain(frame.index);
        self.queued_bytes += len;
        self.background.push_back(Queued {
            frame: Frame::Shared(frame),
            droppable: false,
            latest: true,
        });
        self.latest.insert(at, frame.index);
        Ok(was_empty)
    }

    /// Moves the background lane, in order, to the end of the queue: what comes after must
    /// not overtake it (the connection now follows what they are about, or a frame that must
    /// come after them is queued).
    pub fn promote_background(&mut self) {
        if !self.background.is_empty() {
            self.queue.extend(self.background.drain(..));
        }
    }

    /// Whether the background lane holds anything.
    pub fn has_background(&self) -> bool {
        !self.background.is_empty()
    }

    /// After [`SharedFrames::replace`] changed `frame`'s content from `previous_len` bytes to
    /// `frame.len()`: if this outbox has it queued (by [`Outbox::push_latest`]), its queued
    /// bytes now count the new length, which is what it will write.
    pub fn recharge_latest(&mut self, frame: SharedFrame, previous_len: usize) {
        if self.has_latest(frame) {
            self.queued_bytes = self.queued_bytes - previous_len + frame.len();
        }
    }

    /// Whether `frame` is queued here by [`Outbox::push_latest`] and not taken yet.
    pub fn has_latest(&self, frame: SharedFrame) -> bool {
        self.latest.binary_search(&frame.index).is_ok()
    }

    /// Forgets a taken entry's place in the set of latest-state frames.
    #[inline]
    fn taken(&mut self, q: &Queued) {
        if q.latest {
            if let Frame::Shared(f) = &q.frame {
                if let Ok(at) = self.latest.binary_search(&f.index) {
                    self.latest.remove(at);
                }
            }
        }
    }

    #[inline]
    fn push_frame(
        &mut self,
        frame: Frame,
        droppable: bool,
        latest: bool,
        shared: &mut SharedFrames,
    ) -> Result<bool, OutboxOverflow> {
        let was_empty = self.queue.is_empty() && self.background.is_empty();
        let len = frame.len();
        let q = Queued {
            frame,
            droppable,
            latest,
        };
        // The common case: the frame fits (one add and one compare).
        if self.queued_bytes + len <= self.budget {
            self.accept(q, len, shared);
            return Ok(was_empty);
        }
        self.push_over_budget(q, was_empty, shared)
    }

    #[inline]
    fn accept(&mut self, q: Queued, len: usize, shared: &mut SharedFrames) {
        if let Frame::Shared(f) = &q.frame {
            shared.retain(f.index);
        }
        self.queued_bytes += len;
        self.queue.push_back(q);
    }

    /// [`Outbox::push`] when the frame does not fit as things stand.
    #[cold]
    fn push_over_budget(
        &mut self,
        q: Queued,
        was_empty: bool,
        shared: &mut SharedFrames,
    ) -> Result<bool, OutboxOverflow> {
        let len = q.frame.len();
        let droppable = q.droppable;
        self.drop_droppable(len, shared);
        // A single frame larger than the whole budget is still accepted into an empty queue,
        // so one big durable event never wedges a healthy connection.
        if self.queued_bytes + len > self.budget && !self.is_empty() {
            if droppable {
                self.count_drop(1);
                return Ok(false);
            }
            return Err(OutboxOverflow::DurableDoesNotFit);
        }
        self.accept(q, len, shared);
        Ok(was_empty)
    }

    fn drop_droppable(&mut self, need: usize, shared: &mut SharedFrames) {
        // The common case, a reader behind on a stream of deltas: the oldest frames are
        // droppable and dropping a few from the front makes room, without walking the whole
        // queue (which holds up to a budget's worth of frames) on every push.
        let mut front = 0;
        while self.queued_bytes + need > self.budget {
            match self.queue.front() {
                Some(q) if q.droppable => {}
                _ => break,
            }
            let Some(q) = self.queue.pop_front() else {
                break;
            };
            self.queued_bytes -= q.frame.len();
            q.frame.discard(shared);
            front += 1;
        }
        self.count_drop(front);
        if self.queued_bytes + need <= self.budget {
            return;
        }
        let before = self.queue.len();
        let mut bytes = self.queued_bytes;
        let budget = self.budget;
        self.queue.retain(|q| {
            if bytes + need > budget && q.droppable {
                bytes -= q.frame.len();
                if let Frame::Shared(f) = &q.frame {
                    shared.release(f.index);
                }
                false
            } else {
                true
            }
        });
        self.queued_bytes = bytes;
        let dropped = (before - self.queue.len()) as u64;
        self.count_drop(dropped);
    }

    /// Counts `n` frames lost before they reached this queue (a gateway's broken link) among
    /// the drops to report.
    pub(crate) fn count_lost(&mut self, n: u64) {
        self.count_drop(n);
        self.lost_unreported += n;
    }

    fn count_drop(&mut self, n: u64) {
        self.dropped += n;
        self.dropped_unreported += n;
    }

    /// Queues a connection's last frame (the reason it is being closed) whatever the budget:
    /// the budget bounds what a peer can pile up, and nothing follows this frame.
    pub fn push_final(&mut self, frame: Bytes) -> bool {
        let was_empty = self.is_empty();
        self.promote_background();
        self.queued_bytes += frame.len();
        self.queue.push_back(Queued {
            frame: Frame::Own(frame),
            droppable: false,
            latest: false,
        });
        was_empty
    }

    /// The next frame to write.
    #[inline]
    pub fn pop(&mut self, shared: &mut SharedFrames) -> Option<Bytes> {
        let q = match self.queue.pop_front() {
            Some(q) => q,
            None => self.background.pop_front()?,
        };
        self.taken(&q);
        // The frame's bytes, not the length recorded when it was queued: a latest-state
        // frame may have been replaced since (its charge was updated then).
        let bytes = q.frame.into_bytes(shared);
        self.queued_bytes -= bytes.len();
        Some(bytes)
    }

    /// Moves frames, in order, into `out` until at least `max_bytes` bytes were taken or
    /// nothing is left (so one frame larger than `max_bytes` is still taken whole). Returns
    /// the bytes taken.
    pub fn pop_into(
        &mut self,
        max_bytes: usize,
        out: &mut Vec<Bytes>,
        shared: &mut SharedFrames,
    ) -> usize {
        let mut taken = 0;
        while taken < max_bytes {
            let Some(q) = self
                .queue
                .pop_front()
                .or_else(|| self.background.pop_front())
            else {
                break;
            };
            self.taken(&q);
            let bytes = q.frame.into_bytes(shared);
            taken += bytes.len();
            out.push(bytes);
        }
        self.queued_bytes -= taken;
        taken
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.background.is_empty()
    }

    /// Bytes currently queued.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Whether `need` more bytes fit without dropping anything.
    pub fn fits(&self, need: usize) -> bool {
        self.queued_bytes + need <= self.budget
    }

    /// Frames dropped so far because the reader fell behind.
    pub fn dropped_total(&self) -> u64 {
        self.dropped
    }

    /// Drops not yet reported to the client.
    pub fn unreported_drops(&self) -> u64 {
        self.dropped_unreported
    }

    /// The drops not yet reported, and of those the ones lost before they reached this
    /// queue, without taking them.
    pub fn unreported(&self) -> Drops {
        Drops {
            count: self.dropped_unreported,
            lost_upstream: self.lost_unreported,
        }
    }

    /// Takes the count of drops not yet reported to the client.
    pub fn take_unreported_drops(&mut self) -> Drops {
        let drops = self.unreported();
        self.dropped_unreported = 0;
        self.lost_unreported = 0;
        drops
    }

    /// Drops queued droppable frames, oldest first and counted as drops, until `need` more
    /// bytes fit the budget (or none is left). Used before a drop report so that the report
    /// and the durable frame after it fit without dropping anything the report would miss.
    pub fn make_room(&mut self, need: usize, shared: &mut SharedFrames) {
        if self.queued_bytes + need > self.budget {
            self.drop_droppable(need, shared);
        }
    }

    /// Droppable frames still queued (what a connection closed now would lose unread).
    pub fn queued_droppable(&self) -> u64 {
        self.queue.iter().filter(|q| q.droppable).count() as u64
    }

    /// Discards everything queued (the connection is going away).
    pub fn clear(&mut self, shared: &mut SharedFrames) {
        for q in self.queue.drain(..).chain(self.background.drain(..)) {
            q.frame.discard(shared);
        }
        self.latest.clear();
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
    fn the_background_lane_waits_behind_own_frames_and_before_a_final_frame() {
        let mut t = SharedFrames::default();
        let mut o = Outbox::new(1_000);
        let bg = t.insert_held(Bytes::from_static(b"bg"));
        assert_eq!(o.push_latest_background(bg, &mut t), Ok(true));
        assert_eq!(o.push_latest_background(bg, &mut t), Ok(false), "coalesced");
        o.push(Bytes::from_static(b"own"), false, &mut t).unwrap();
        assert_eq!(o.queued_bytes(), 5);
        assert_eq!(o.pop(&mut t).unwrap(), "own");
        assert_eq!(o.pop(&mut t).unwrap(), "bg");
        assert!(o.is_empty());
        // Promoted (or before a final frame), it keeps its place before what follows.
        o.push_latest_background(bg, &mut t).unwrap();
        o.push_final(Bytes::from_static(b"bye"));
        let mut out = Vec::new();
        assert_eq!(o.pop_into(usize::MAX, &mut out, &mut t), 5);
        assert_eq!(out, ["bg", "bye"]);
        t.let_go(bg);
        assert!(t.is_empty());
    }

    #[test]
    fn fifo_and_budget_accounting() {
        let mut t = SharedFrames::default();
        let mut o = Outbox::new(100);
        assert_eq!(o.push(frame(10), false, &mut t), Ok(true));
        assert_eq!(o.push(frame(20), false, &mut t), Ok(false));
        assert_eq!(o.queued_bytes(), 30);
        assert_eq!(o.pop(&mut t).unwrap().len(), 10);
        assert_eq!(o.pop(&mut t).unwrap().len(), 20);
        assert!(o.pop(&mut t).is_none());
        assert_eq!(o.queued_bytes(), 0);
    }

    #[test]
    fn pop_into_takes_frames_in_order_up_to_the_byte_limit() {
        let mut t = SharedFrames::default();
        let mut o = Outbox::new(1000);
        for n in [10, 20, 30, 40] {
            o.push(frame(n), false, &mut t).unwrap();
        }
        let mut out = Vec::new();
        // Stops once 25 bytes are reached: the frame that crosses the limit is taken whole.
        assert_eq!(o.pop_into(25, &mut out, &mut t), 30);
        assert_eq!(out.iter().map(Bytes::len).collect::<Vec<_>>(), vec![10, 20]);
        assert_eq!(o.queued_bytes(), 70);
        assert_eq!(o.pop_into(usize::MAX, &mut out, &mut t), 70);
        assert_eq!(
            out.iter().map(Bytes::len).collect::<Vec<_>>(),
            vec![10, 20, 30, 40]
        );
        assert!(o.is_empty() && o.queued_bytes() == 0);
        assert_eq!(o.pop_into(usize::MAX, &mut out, &mut t), 0);
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn shared_frames_interleave_with_own_frames_and_are_freed_by_the_last_holder() {
        let mut t = SharedFrames::default();
        let mut a = Outbox::new(1000);
        let mut b = Outbox::new(1000);
        let mut c = Outbox::new(1000);
        a.push(Bytes::from_static(b"own-a"), false, &mut t).unwrap();
        let s = t.insert(Bytes::from_static(b"shared"));
        assert_eq!(s.len(), 6);
        for o in [&mut a, &mut b, &mut c] {
            o.push_shared(s, false, &mut t).unwrap();
        }
        t.settle(s);
        assert_eq!(t.len(), 1, "held by three outboxes");
        b.push(Bytes::from_static(b"own-b"), false, &mut t).unwrap();
        assert_eq!(a.queued_bytes(), 11);
        assert_eq!(a.pop(&mut t).unwrap(), "own-a");
        assert_eq!(a.pop(&mut t).unwrap(), "shared");
        let mut out = Vec::new();
        b.pop_into(usize::MAX, &mut out, &mut t);
        assert_eq!(out, vec!["shared", "own-b"]);
        assert_eq!(t.len(), 1, "c still holds it");
        c.clear(&mut t);
        assert!(t.is_empty(), "freed when the last holder lets go");
        assert_eq!(c.queued_bytes(), 0);

        // A frame nobody took is freed by `settle`, and its slot reused.
        let unused = t.insert(Bytes::from_static(b"nobody"));
        t.settle(unused);
        assert!(t.is_empty());
        let next = t.insert(Bytes::from_static(b"next"));
        a.push_shared(next, true, &mut t).unwrap();
        t.settle(next);
        assert_eq!(a.pop(&mut t).unwrap(), "next");
        assert!(t.is_empty());
    }

    #[test]
    fn drops_streaming_frames_before_refusing_durable_ones() {
        let mut t = SharedFrames::default();
        let mut o = Outbox::new(100);
        o.push(frame(40), false, &mut t).unwrap();
        let delta = t.insert(frame(30));
        o.push_shared(delta, true, &mut t).unwrap();
        t.settle(delta);
        o.push(frame(20), true, &mut t).unwrap();
        // 90 queued; a durable 50 needs both droppable frames gone.
        assert_eq!(o.push(frame(50), false, &mut t), Ok(false));
        assert_eq!(o.dropped_total(), 2);
        assert!(t.is_empty(), "the dropped shared frame is released");
        assert_eq!(o.take_unreported_drops().count, 2);
        assert_eq!(o.take_unreported_drops(), Drops::default());
        assert_eq!(o.queued_bytes(), 90);
        // Nothing droppable left: a durable frame that does not fit is refused.
        assert_eq!(
            o.push(frame(20), false, &mut t),
            Err(OutboxOverflow::DurableDoesNotFit)
        );
        let durable = t.insert(frame(20));
        assert_eq!(
            o.push_shared(durable, false, &mut t),
            Err(OutboxOverflow::DurableDoesNotFit)
        );
        t.settle(durable);
        assert!(t.is_empty(), "a refused shared frame is not held");
        // A droppable one is dropped.
        assert_eq!(o.push(frame(20), true, &mut t), Ok(false));
        assert_eq!(o.dropped_total(), 3);
        assert!(o.queued_bytes() <= 100);
    }

    #[test]
    fn an_oversize_frame_fits_an_empty_queue() {
        let mut t = SharedFrames::default();
        let mut o = Outbox::new(10);
        assert_eq!(o.push(frame(50), false, &mut t), Ok(true));
        assert_eq!(
            o.push(frame(1), false, &mut t),
            Err(OutboxOverflow::DurableDoesNotFit)
        );
    }
}
