//! A server's counters as its own `stats` reply gives them, and their change over a test.

use std::collections::HashMap;

/// The numeric `STAT name value` lines of a `stats` reply (other lines and values are skipped).
pub fn parse_stats(text: &str) -> HashMap<String, u64> {
    let mut stats = HashMap::new();
    for line in text.lines() {
        let mut fields = line.split(' ');
        if fields.next() == Some("STAT") {
            if let (Some(name), Some(value)) = (fields.next(), fields.next()) {
                if let Ok(value) = value.trim_end().parse() {
                    stats.insert(name.to_string(), value);
                }
            }
        }
    }
    stats
}

/// `after[name] - before[name]` (missing counts as 0).
pub fn delta(before: &HashMap<String, u64>, after: &HashMap<String, u64>, name: &str) -> u64 {
    after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0)
}
