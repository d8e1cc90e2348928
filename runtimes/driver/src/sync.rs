//! Executor-agnostic wake-ups built on `event-listener`: the driver's stand-ins for tokio's
//! `Notify`, `watch` and `mpsc`, usable from any executor and from plain threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use event_listener::Event;

/// Locks `m`, ignoring poisoning: a panic inside the host is a bug, and the other connections
/// keep being served.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A wake-up for a single waiter that is never lost: a notification sent while nobody waits
/// is stored (one permit) and consumed by the next [`Notify::notified`].
pub(crate) struct Notify {
    permit: AtomicBool,
    event: Event,
}

impl Notify {
    pub(crate) fn new() -> Self {
        Notify {
            permit: AtomicBool::new(false),
            event: Event::new(),
        }
    }

    pub(crate) fn notify(&self) {
        self.permit.store(true, Ordering::SeqCst);
        self.event.notify(usize::MAX);
    }

    pub(crate) async fn notified(&self) {
        loop {
            if self.permit.swap(false, Ordering::SeqCst) {
                return;
            }
            let listener = self.event.listen();
            // Registered before the second check, so a `notify` in between is not missed.
            if self.permit.swap(false, Ordering::SeqCst) {
                return;
            }
            listener.await;
        }
    }
}

/// A flag that is set once and can be awaited by any number of waiters.
pub(crate) struct Flag {
    set: AtomicBool,
    event: Event,
}

impl Flag {
    pub(crate) fn new() -> Self {
        Flag {
            set: AtomicBool::new(false),
            event: Event::new(),
        }
    }

    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    /// Sets the flag and wakes every waiter; returns whether it was already set.
    pub(crate) fn set(&self) -> bool {
        let was = self.set.swap(true, Ordering::SeqCst);
        if !was {
            self.event.notify(usize::MAX);
        }
        was
    }

    /// Waits until the flag is set (returns at once if it is).
    pub(crate) async fn wait(&self) {
        loop {
            if self.is_set() {
                return;
            }
            let listener = self.event.listen();
            if self.is_set() {
                return;
            }
            listener.await;
        }
    }
}

/// A value that changes over time; waiters wait for a predicate to hold.
pub(crate) struct Watch<T> {
    value: Mutex<T>,
    event: Event,
}

impl<T: Clone> Watch<T> {
    pub(crate) fn new(value: T) -> Self {
        Watch {
            value: Mutex::new(value),
            event: Event::new(),
        }
    }

    pub(crate) fn get(&self) -> T {
        lock(&self.value).clone()
    }

    pub(crate) fn set(&self, value: T) {
        *lock(&self.value) = value;
        self.event.notify(usize::MAX);
    }

    /// Changes the value in place and wakes the waiters.
    pub(crate) fn update(&self, f: impl FnOnce(&mut T)) {
        f(&mut lock(&self.value));
        self.event.notify(usize::MAX);
    }

    /// Waits until `pred` holds for the value and returns that value.
    pub(crate) async fn wait_for(&self, pred: impl Fn(&T) -> bool) -> T {
        loop {
            {
                let v = lock(&self.value);
                if pred(&v) {
                    return v.clone();
                }
            }
            let listener = self.event.listen();
            {
                let v = lock(&self.value);
                if pred(&v) {
                    return v.clone();
                }
            }
            listener.await;
        }
    }
}

/// An unbounded queue with one async consumer; producers may be plain threads.
pub(crate) struct Queue<T> {
    items: Mutex<VecDeque<T>>,
    ready: Notify,
}

impl<T> Queue<T> {
    pub(crate) fn new() -> Self {
        Queue {
            items: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
        }
    }

    pub(crate) fn push(&self, item: T) {
        lock(&self.items).push_back(item);
        self.ready.notify();
    }

    /// Waits for the next item.
    pub(crate) async fn pop(&self) -> T {
        loop {
            if let Some(item) = lock(&self.items).pop_front() {
                return item;
            }
            self.ready.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn notify_before_wait_is_kept() {
        let n = Notify::new();
        n.notify();
        futures_lite::future::block_on(n.notified());
    }

    #[test]
    fn flag_and_watch_wake_waiters_on_other_threads() {
        let flag = Arc::new(Flag::new());
        let watch = Arc::new(Watch::new(0usize));
        let (f, w) = (flag.clone(), watch.clone());
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w.set(3);
            assert!(!f.set());
        });
        futures_lite::future::block_on(async {
            assert_eq!(watch.wait_for(|v| *v == 3).await, 3);
            flag.wait().await;
        });
        t.join().unwrap();
        assert!(flag.set(), "second set reports it was already set");
    }
}
