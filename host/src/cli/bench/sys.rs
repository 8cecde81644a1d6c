//! What the bench asks the OS about itself: its CPU time (`getrusage`) and
//! its open-file limit (raised to the hard limit for the idle streams).

/// CPU seconds (user + system) this process has used so far, all threads.
#[cfg(unix)]
pub fn cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: getrusage succeeded, so it filled `usage` (and zeroed is valid anyway).
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

#[cfg(not(unix))]
pub fn cpu_seconds() -> Option<f64> {
    None
}

/// Raises the soft open-file limit to the hard one: every idle stream is a
/// socket. Failing is not an error: the idle phase reports what it opened.
#[cfg(unix)]
pub fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid `rlimit`; the soft limit does not exceed the hard one.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

#[cfg(not(unix))]
pub fn raise_open_file_limit() {}
