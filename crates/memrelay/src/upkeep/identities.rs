//! Which memcached process each server was when memrelay last looked (`pid` and start time, from
//! its `stats`), kept in the repair spool folder (`identities`) so that a memrelay started again
//! can tell a server that restarted while it was down: a restart lost every value the server
//! had, and only a resync brings them back. Written whole (temporary file and rename) whenever an
//! identity is first seen or changes; read at start.
//!
//! The file is `memrelay-server-identities 1` and then `<server name in base64> <pid> <started>`
//! a line, `started` in Unix seconds (`time - uptime`).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine;

const MAGIC: &str = "memrelay-server-identities 1";
/// How far two readings of one process's start time may differ (`time` and `uptime` are whole
/// seconds, read at different instants).
const START_SLACK: u64 = 2;

/// One memcached process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    pub pid: u64,
    /// Unix seconds.
    pub started: u64,
}

impl Identity {
    /// From `stats`' `pid`, `time` and `uptime`.
    pub fn from_stats(pid: u64, time: u64, uptime: u64) -> Identity {
        Identity { pid, started: time.saturating_sub(uptime) }
    }

    /// Whether `other` is a different process (a restart): another pid, or the same pid started
    /// at another time.
    pub fn restarted_as(&self, other: &Identity) -> bool {
        self.pid != other.pid || self.started.abs_diff(other.started) > START_SLACK
    }
}

/// The identities file of a spool folder.
pub(crate) struct IdentityFile {
    path: PathBuf,
}

impl IdentityFile {
    pub fn in_dir(dir: &Path) -> IdentityFile {
        IdentityFile { path: dir.join("identities") }
    }

    /// The identities by server name; none when there is no file, and none (with a log line)
    /// when it cannot be read: then no restart can be told, as without a spool.
    pub fn load(&self) -> HashMap<String, Identity> {
        match crate::own_files::read_to_string(&self.path, crate::own_files::MAX_SETTINGS_FILE) {
            Ok(text) => parse(&text).unwrap_or_else(|| {
                eprintln!("memrelay: {} is not an identities file; left out", self.path.display());
                HashMap::new()
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => HashMap::new(),
            Err(error) => {
                eprintln!("memrelay: {} is unreadable: {error}", self.path.display());
                HashMap::new()
            }
        }
    }

    /// Writes `identities` whole.
    pub fn save<'a>(&self, identities: impl Iterator<Item = (&'a str, Identity)>) -> io::Result<()> {
        let mut text = format!("{MAGIC}\n");
        for (name, identity) in identities {
            let name = base64::engine::general_purpose::STANDARD.encode(name);
            text.push_str(&format!("{name} {} {}\n", identity.pid, identity.started));
        }
        let temporary = self.path.with_extension("new");
        fs::write(&temporary, text)?;
        fs::rename(&temporary, &self.path)
    }
}

fn parse(text: &str) -> Option<HashMap<String, Identity>> {
    let mut lines = text.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let mut identities = HashMap::new();
    for line in lines {
        let mut fields = line.split(' ');
        let name = base64::engine::general_purpose::STANDARD.decode(fields.next()?).ok()?;
        let (pid, started) = (fields.next()?.parse().ok()?, fields.next()?.parse().ok()?);
        if fields.next().is_some() {
            return None;
        }
        identities.insert(String::from_utf8(name).ok()?, Identity { pid, started });
    }
    Some(identities)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_read_back_as_written_and_a_broken_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let file = IdentityFile::in_dir(dir.path());
        assert!(file.load().is_empty(), "no file yet");
        let a = Identity { pid: 42, started: 1_700_000_000 };
        let b = Identity { pid: 7, started: 1_700_000_100 };
        file.save([("127.0.0.1:11211", a), ("a name with spaces\n", b)].into_iter()).unwrap();
        let back = file.load();
        assert_eq!(back.get("127.0.0.1:11211"), Some(&a));
        assert_eq!(back.get("a name with spaces\n"), Some(&b));
        fs::write(dir.path().join("identities"), "something else\n").unwrap();
        assert!(file.load().is_empty());
        assert_eq!(parse(&format!("{MAGIC}\nbm8= 1\n")), None, "a short line");
    }

    #[test]
    fn a_restart_is_another_pid_or_another_start() {
        let seen = Identity::from_stats(100, 1_000_060, 60);
        assert_eq!(seen.started, 1_000_000);
        assert!(!seen.restarted_as(&Identity::from_stats(100, 1_000_090, 89)), "one second of rounding");
        assert!(seen.restarted_as(&Identity::from_stats(101, 1_000_090, 90)), "another pid");
        assert!(seen.restarted_as(&Identity::from_stats(100, 1_000_090, 5)), "the same pid, started again");
    }
}
