//! Raising the process's open-file limit (`RLIMIT_NOFILE`) to its hard limit, so a server (or
//! the load generator) can hold as many connections as the OS allows it.

/// Raises the soft `RLIMIT_NOFILE` to the hard limit. Returns the limit now in force, or why
/// it could not be read or raised (the soft limit then stays as it was). Unix only; elsewhere
/// `None`.
#[cfg(unix)]
// `rlim_t` is `u64` on Linux and macOS but not on every Unix.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn raise_to_hard_limit() -> Option<Result<u64, String>> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` through a valid pointer to a local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Some(Err(std::io::Error::last_os_error().to_string()));
    }
    if limit.rlim_cur >= limit.rlim_max {
        return Some(Ok(limit.rlim_cur as u64));
    }
    #[allow(unused_mut)]
    let mut target = limit.rlim_max;
    // macOS refuses a soft limit above OPEN_MAX under an unlimited hard limit.
    #[cfg(target_os = "macos")]
    if target == libc::RLIM_INFINITY {
        target = libc::OPEN_MAX as libc::rlim_t;
    }
    let raised = libc::rlimit {
        rlim_cur: target,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: `setrlimit` reads one `rlimit` through a valid pointer to a local.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Some(Err(std::io::Error::last_os_error().to_string()));
    }
    Some(Ok(raised.rlim_cur as u64))
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (Unix only; elsewhere `None`).
#[cfg(not(unix))]
pub(crate) fn raise_to_hard_limit() -> Option<Result<u64, String>> {
    None
}
