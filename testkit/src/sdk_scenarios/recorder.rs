//! Event recorder: a session's events and the client's lifecycle notifications, in order.

use super::*;

/// Collects the events of one [`EventSubscription`] in a background task.
pub struct Recorder {
    rx: mpsc::UnboundedReceiver<Result<SessionEvent, String>>,
    /// Every event received so far, in order.
    pub seen: Vec<SessionEvent>,
    /// Index in `seen` where the current turn starts (see [`Recorder::turn`]).
    cursor: usize,
}

impl Recorder {
    /// Starts forwarding `sub`'s events.
    pub fn new(mut sub: EventSubscription) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                match sub.recv().await {
                    Ok(ev) => {
                        if tx.send(Ok(ev)).is_err() {
                            break;
                        }
                    }
                    Err(e) if matches!(e.kind(), RecvErrorKind::Closed) => break,
                    Err(e) => {
                        let _ = tx.send(Err(format!("event subscription error: {e}")));
                    }
                }
            }
        });
        Recorder {
            rx,
            seen: Vec::new(),
            cursor: 0,
        }
    }

    async fn next(&mut self, what: &str) -> SessionEvent {
        match within(what, self.rx.recv()).await {
            Some(Ok(ev)) => {
                self.seen.push(ev.clone());
                ev
            }
            Some(Err(e)) => panic!("{e} while waiting for {what}"),
            None => panic!(
                "event subscription closed while waiting for {what}; seen {:?}",
                types(&self.seen)
            ),
        }
    }

    /// Receives until an event of type `ty` arrives and returns it.
    pub async fn wait_for(&mut self, ty: &str) -> SessionEvent {
        let what = format!("a {ty:?} event");
        loop {
            let ev = self.next(&what).await;
            if ev.event_type == ty {
                return ev;
            }
        }
    }

    /// Receives until the next `session.idle` and returns every event since the previous call
    /// (the events of one turn, idle included).
    pub async fn turn(&mut self) -> Vec<SessionEvent> {
        let start = self.cursor;
        // The idle may already be among the events received by an earlier wait_for.
        if !self.seen[start..]
            .iter()
            .any(|e| e.event_type == "session.idle")
        {
            self.wait_for("session.idle").await;
        }
        let end = start
            + self.seen[start..]
                .iter()
                .position(|e| e.event_type == "session.idle")
                .expect("idle present")
            + 1;
        self.cursor = end;
        self.seen[start..end].to_vec()
    }

    /// Takes whatever has arrived without waiting.
    pub fn drain(&mut self) {
        while let Ok(item) = self.rx.try_recv() {
            match item {
                Ok(ev) => self.seen.push(ev),
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Waits a little and asserts that nothing more arrived.
    pub async fn assert_quiet(&mut self, for_: Duration) {
        tokio::time::sleep(for_).await;
        let before = self.seen.len();
        self.drain();
        assert_eq!(
            self.seen.len(),
            before,
            "unexpected extra events: {:?}",
            types(&self.seen[before..])
        );
    }
}

/// Receives lifecycle notifications until one of `ty` for `session` arrives.
pub async fn wait_lifecycle(
    sub: &mut LifecycleSubscription,
    ty: SessionLifecycleEventType,
    session: &SessionId,
) -> SessionLifecycleEvent {
    let what = format!("lifecycle {ty:?} for {session}");
    within(&what, async {
        loop {
            match sub.recv().await {
                Ok(ev) if ev.event_type == ty && ev.session_id == *session => return ev,
                Ok(_) => continue,
                Err(e) => panic!("lifecycle subscription error: {e}"),
            }
        }
    })
    .await
}
