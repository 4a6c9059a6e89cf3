//! How memrelay's memory goes back to the system. Buffers of 4 MiB and more are mapped on their
//! own and unmapped when freed (glibc otherwise raises this threshold after each such free, up to
//! 32 MiB, and keeps the freed memory in its heap). Smaller ones come from the heap, which keeps
//! up to 16 MiB free at its top while memrelay is busy, so a stream of 512 KiB values does not
//! map, fault in and unmap a buffer per request; once a second a trimmer thread gives the heap's
//! free pages back, so connections gone idle after large requests return to the baseline.

use std::time::Duration;

/// How often the free pages are given back.
const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Buffers of this size and more are mapped on their own ([`configure_allocator`]): their pages
/// cost memory only once written, and growing one remaps it instead of copying it.
pub const MAP_THRESHOLD: usize = 4 * 1024 * 1024;

/// Sets the allocator's thresholds; called first thing in `main`, before any other thread.
pub fn configure_allocator() {
    // SAFETY: mallopt only sets allocator parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MAP_THRESHOLD as libc::c_int);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 16 * 1024 * 1024);
    }
}

/// Starts the trimmer thread (it runs until the process exits).
pub fn start_trimmer() -> std::io::Result<()> {
    std::thread::Builder::new().name("memrelay-trim".into()).spawn(|| loop {
        std::thread::sleep(TRIM_EVERY);
        // SAFETY: malloc_trim only returns free memory to the system.
        unsafe {
            libc::malloc_trim(0);
        }
    })?;
    Ok(())
}
