//! memrelay's own processor time by thread role, from `/proc/self/task` (procfs): for the
//! metrics endpoint, and per measurement window for `windows.jsonl` and `summary.json`.

/// CPU seconds by thread role.
pub type ByRole = Vec<(String, f64)>;

/// CPU seconds (user + system) of memrelay's live threads, by role: the thread's name without its
/// number (`loop`, `worker`, `stats`, `sampler`, ...); the main thread is `main`, which is the
/// net thread of the pool engine; threads memrelay did not name are `other`.
pub fn seconds_by_role() -> ByRole {
    let mut roles: ByRole = Vec::new();
    let ticks = procfs::ticks_per_second() as f64;
    let me = procfs::process::Process::myself();
    if let Ok(tasks) = me.as_ref().map(|p| p.tasks()) {
        for task in tasks.into_iter().flatten().flatten() {
            let Ok(stat) = task.stat() else { continue };
            let role = match (task.tid == task.pid, stat.comm.as_str()) {
                (true, _) => "main".to_string(),
                // Threads memrelay did not name (the HTTP library's) keep the process's name.
                (false, "memrelay") => "other".to_string(),
                (false, name) => role_of(name),
            };
            let seconds = (stat.utime + stat.stime) as f64 / ticks;
            match roles.iter_mut().find(|(r, _)| *r == role) {
                Some((_, total)) => *total += seconds,
                None => roles.push((role, seconds)),
            }
        }
    }
    roles
}

/// The CPU seconds per role spent between two readings (roles that appear only later count
/// from zero).
pub fn difference(from: &[(String, f64)], to: &[(String, f64)]) -> ByRole {
    to.iter()
        .map(|(role, seconds)| {
            let before = from.iter().find(|(r, _)| r == role).map_or(0.0, |(_, s)| *s);
            (role.clone(), (seconds - before).max(0.0))
        })
        .collect()
}

/// `loop-3` → `loop`, `worker-12` → `worker`, `stats` → `stats`.
fn role_of(thread_name: &str) -> String {
    let trimmed = thread_name.trim_end_matches(|c: char| c.is_ascii_digit());
    trimmed.strip_suffix('-').unwrap_or(trimmed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_drop_thread_numbers_and_differences_start_from_zero() {
        assert_eq!(role_of("worker-12"), "worker");
        assert_eq!(role_of("stats"), "stats");
        let from = vec![("main".to_string(), 1.0)];
        let to = vec![("main".to_string(), 1.5), ("worker".to_string(), 0.25)];
        assert_eq!(difference(&from, &to), vec![("main".to_string(), 0.5), ("worker".to_string(), 0.25)]);
    }

    /// This thread's own CPU time (the independent reference), from the kernel's thread clock.
    fn thread_cpu_seconds() -> f64 {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `now` is a valid timespec for the call to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
    }

    #[test]
    fn this_thread_burning_cpu_shows_up() {
        let before = seconds_by_role();
        let (start, deadline) = (thread_cpu_seconds(), std::time::Instant::now() + std::time::Duration::from_secs(20));
        // Burn 150 ms of this thread's own CPU time, however busy the machine is (bounded).
        let mut x = 0u64;
        while thread_cpu_seconds() - start < 0.15 && std::time::Instant::now() < deadline {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let burned = thread_cpu_seconds() - start;
        let spent: f64 = difference(&before, &seconds_by_role()).iter().map(|(_, s)| s).sum();
        // /proc counts in clock ticks (10 ms); other test threads only add.
        assert!(spent >= burned - 0.03, "{spent} s in /proc, {burned} s burned");
    }
}
