//! Locking shared state.

use std::sync::Mutex;

/// Locks `m`, recovering it from a panic of another holder (the state stays usable).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
