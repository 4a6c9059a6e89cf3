//! The repair sets on disk (`--repair-spool-dir DIR`), so that a memrelay restart does not forget
//! which replicas missed which writes: one file per server ([`super::spool_file`] has the
//! format), written by the spool thread from what [`Repair`] collected since its last turn,
//! removed when the server is up to date, and read back at start before any client is accepted.
//!
//! Records are appended every [`TICK`]; a server's file is rewritten whole from its set (to a
//! temporary file, synced, then renamed over it) when it is first written, when it holds more
//! lines than the set's bound allows (duplicates: a key missed again after it was copied), after
//! a write that failed (the records that write took are in the set still, so none is lost and no
//! torn line stays in the file), and after it was read back at start. The thread's last turn,
//! at a clean stop (SIGTERM, SIGINT), comes after the engines acknowledged their last write; a
//! memrelay killed outright loses what was acknowledged in the last turn (see docs/operating.md
//! for the window).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::spool_file::{self, Contents};
use crate::generation::Current;
use crate::upstream::health::Health;
use crate::upstream::registry::Registry;
use crate::upstream::repair_set::{Record, Repair};

/// How often the spool thread writes what the sets gained. An acknowledged write reaches the
/// file within a turn and the write itself; docs/operating.md states 100 ms.
pub(crate) const TICK: Duration = Duration::from_millis(10);

pub(crate) struct Spool {
    dir: PathBuf,
    /// The files open for appending: each in step with its server's set.
    files: HashMap<usize, SpoolFile>,
    /// Servers whose file must be rewritten from the set before anything is appended to it.
    stale: HashSet<usize>,
    /// More lines than this in a file and it is rewritten from the set.
    max_lines: usize,
}

struct SpoolFile {
    file: File,
    lines: usize,
}

impl Spool {
    /// Opens `dir` (created if missing) and puts every record of the current servers' files back
    /// into `repair`. A file that is damaged (a line that is not a record, anywhere but at the
    /// end) means its server is flushed and resynced: the keys it missed can no longer all be
    /// told, and a resync in add mode alone would leave their replaced values there. Files of
    /// servers not configured now are left alone (with a log line).
    pub(crate) fn open(dir: &Path, registry: &Registry, servers: &[usize], repair: &Repair) -> io::Result<Spool> {
        fs::create_dir_all(dir)?;
        repair.spool_records();
        let mut spool = Spool {
            dir: dir.to_path_buf(),
            files: HashMap::new(),
            stale: HashSet::new(),
            max_lines: 2 * repair.max_keys + 16,
        };
        let by_name: HashMap<String, usize> = servers.iter().map(|&id| (registry.name(id), id)).collect();
        let by_file: HashMap<OsString, usize> =
            servers.iter().map(|&id| (file_name(&registry.name(id)).into(), id)).collect();
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            let file = path.file_name().unwrap_or_default().to_os_string();
            if file.to_string_lossy().ends_with(".spool.tmp") {
                // A rewrite cut short: the file it was to replace is still in place.
                fs::remove_file(&path)?;
                continue;
            }
            if path.extension().is_none_or(|e| e != "spool") {
                continue;
            }
            let contents = spool_file::read(&path);
            // By the name in the file, or when that cannot be read, by the file's own name.
            let server = match &contents {
                Ok(Contents { name: Some(name), .. }) => by_name.get(name),
                _ => by_file.get(&file),
            };
            let Some(&server) = server else {
                match &contents {
                    Ok(Contents { name: Some(name), .. }) => eprintln!(
                        "memrelay: repair spool {} is for server {name}, which is not configured; left alone",
                        path.display()
                    ),
                    _ => eprintln!(
                        "memrelay: repair spool {} is unreadable and of no configured server; left alone",
                        path.display()
                    ),
                }
                continue;
            };
            let name = registry.name(server);
            let damage = match &contents {
                Err(error) => Some(format!("cannot be read ({error})")),
                Ok(contents) if contents.name.is_none() => Some("has no header".to_string()),
                Ok(contents) if contents.is_damaged() => Some(format!("is damaged (line {})", contents.damaged[0])),
                Ok(_) => None,
            };
            if let Some(damage) = damage {
                eprintln!(
                    "memrelay: repair spool {} {damage}: server {name} is flushed and resynced, since the keys it \
                     missed cannot all be told",
                    path.display()
                );
                repair.replay(server, Record::FlushAndResync);
            } else if let Ok(contents) = contents {
                if contents.torn_tail {
                    eprintln!(
                        "memrelay: repair spool {}: its last record was cut short (memrelay stopped while writing \
                         it) and is skipped",
                        path.display()
                    );
                }
                let keys = contents.records.iter().filter(|r| matches!(r, Record::Key(_))).count();
                eprintln!(
                    "memrelay: server {name} missed writes before memrelay stopped: {keys} keys to repair (from {})",
                    path.display()
                );
                for record in contents.records {
                    repair.replay(server, record);
                }
            }
            // Kept until the first turn has rewritten it from the set: a memrelay that dies
            // before then finds it again.
            spool.stale.insert(server);
        }
        Ok(spool)
    }

    /// Writes what `server`'s set gained since the last turn, or removes its file once the server
    /// is up to date. After an error the file is rewritten from the set on the next call.
    pub(crate) fn sync(&mut self, server: usize, name: &str, repair: &Repair) -> io::Result<()> {
        let result = match self.stale.contains(&server) {
            true => self.rewrite(server, name, repair),
            false => self.append(server, name, repair),
        };
        if result.is_err() {
            self.files.remove(&server);
            self.stale.insert(server);
        }
        result
    }

    fn append(&mut self, server: usize, name: &str, repair: &Repair) -> io::Result<()> {
        let (records, repairing) = repair.take_records(server);
        if records.is_empty() {
            if !repairing && self.files.remove(&server).is_some() {
                remove(&self.path(name))?;
            }
            return Ok(());
        }
        match self.files.get_mut(&server) {
            Some(spool_file) if spool_file.lines + records.len() <= self.max_lines => {
                let mut text = Vec::new();
                for record in &records {
                    spool_file::encode(record, &mut text);
                }
                spool_file.file.write_all(&text)?;
                spool_file.lines += records.len();
                Ok(())
            }
            // A new file, or one that grew past its bound: the set holds every record taken.
            _ => self.rewrite(server, name, repair),
        }
    }

    /// Replaces `server`'s file with one written from its set (none when the set is empty).
    fn rewrite(&mut self, server: usize, name: &str, repair: &Repair) -> io::Result<()> {
        self.files.remove(&server);
        let path = self.path(name);
        let records = repair.snapshot(server);
        if records.is_empty() {
            remove(&path)?;
        } else {
            let mut text = spool_file::header(name);
            for record in &records {
                spool_file::encode(record, &mut text);
            }
            let temporary = self.dir.join(format!("{}.tmp", file_name(name)));
            let written = File::create(&temporary).and_then(|mut file| {
                file.write_all(&text)?;
                file.sync_data()
            });
            if let Err(error) = written {
                // Frees what it took of a full disk.
                let _ = fs::remove_file(&temporary);
                return Err(error);
            }
            fs::rename(&temporary, &path)?;
            File::open(&self.dir)?.sync_all()?;
            let file = OpenOptions::new().append(true).open(&path)?;
            self.files.insert(server, SpoolFile { file, lines: records.len() });
        }
        self.stale.remove(&server);
        Ok(())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(file_name(name))
    }
}

/// The file name of the server named `name`: its name made safe for a path, and a hash of the
/// name so that two names made the same stay apart.
fn file_name(name: &str) -> String {
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("{safe}-{:08x}.spool", hash as u32)
}

fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// The spool thread: every [`TICK`], each server's records, until `stop`; then one last turn, for
/// what the engines acknowledged before they stopped (the caller sets `stop` after they did).
pub(crate) fn run(
    mut spool: Spool,
    registry: Arc<Registry>,
    current: Arc<Current>,
    health: Arc<Health>,
    stop: Arc<AtomicBool>,
) {
    let mut failures = Failures::default();
    loop {
        let last = stop.load(Ordering::Acquire);
        for &server in &current.get().servers {
            if !last && !failures.due(server) {
                continue;
            }
            let name = registry.name(server);
            match spool.sync(server, &name, health.repair()) {
                Ok(()) => failures.cleared(server, &name),
                Err(error) => failures.note(server, &name, &error),
            }
        }
        if last {
            return;
        }
        thread::sleep(TICK);
    }
}

/// After a failed write a server's file is tried again this long after (each try rewrites it
/// whole), and at the last turn.
const RETRY: Duration = Duration::from_secs(1);

/// A spool that cannot be written is logged once a minute at most (repair goes on in memory),
/// and once when it is written again.
#[derive(Default)]
struct Failures {
    last_logged: Option<Instant>,
    /// When each failing server's write last failed.
    failing: HashMap<usize, Instant>,
}

impl Failures {
    fn due(&self, server: usize) -> bool {
        self.failing.get(&server).is_none_or(|failed| failed.elapsed() >= RETRY)
    }

    fn note(&mut self, server: usize, name: &str, error: &io::Error) {
        self.failing.insert(server, Instant::now());
        if self.last_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            self.last_logged = Some(Instant::now());
            eprintln!(
                "memrelay: cannot write the repair spool of server {name}: {error} (repair goes on in memory; \
                 the file is rewritten from the set once it can be)"
            );
        }
    }

    fn cleared(&mut self, server: usize, name: &str) {
        if self.failing.remove(&server).is_some() {
            eprintln!("memrelay: the repair spool of server {name} is written again (rewritten from its set)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Endpoint;
    use crate::upstream::repair_set::Work;

    fn registry() -> Registry {
        Registry::new(&[Endpoint::local(1), Endpoint::local(2)])
    }

    /// The keys `repair` hands out for `server`, each done.
    fn drain(repair: &Repair, server: usize) -> Vec<Work> {
        let mut work = Vec::new();
        while let Some(next) = repair.next(server) {
            work.push(next.clone());
            repair.done(server, next, true);
        }
        work
    }

    #[test]
    fn records_survive_a_restart_and_the_file_goes_once_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let (registry, servers) = (registry(), [0, 1]);
        let repair = Repair::new(10);
        let mut spool = Spool::open(dir.path(), &registry, &servers, &repair).unwrap();
        repair.missed(1, b"a");
        repair.missed(1, b"b c");
        spool.sync(1, &registry.name(1), &repair).unwrap();
        repair.restarted(1);
        spool.sync(1, &registry.name(1), &repair).unwrap(); // appended
        spool.sync(0, &registry.name(0), &repair).unwrap();
        let files: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(files.len(), 1, "only the server that missed writes has a file");

        // A new memrelay over the same folder: server 1 is being repaired, with the same work.
        let again = Repair::new(10);
        let mut spool = Spool::open(dir.path(), &registry, &servers, &again).unwrap();
        assert!(again.is_repairing(1) && !again.is_repairing(0));
        assert_eq!(
            drain(&again, 1),
            [Work::Resync { flush_first: false }, Work::Key(b"a".to_vec()), Work::Key(b"b c".to_vec())]
        );
        // Rewritten on the first turn, removed on the next once the server is up to date.
        spool.sync(1, &registry.name(1), &again).unwrap();
        spool.sync(1, &registry.name(1), &again).unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        let third = Repair::new(10);
        Spool::open(dir.path(), &registry, &servers, &third).unwrap();
        assert!(!third.is_repairing(1));
    }

    #[test]
    fn a_file_read_back_stays_until_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry();
        let repair = Repair::new(10);
        let mut spool = Spool::open(dir.path(), &registry, &[0, 1], &repair).unwrap();
        repair.missed(0, b"a");
        spool.sync(0, &registry.name(0), &repair).unwrap();
        // Read back twice without a turn in between (a memrelay that died right after its start):
        // still there.
        for _ in 0..2 {
            let again = Repair::new(10);
            Spool::open(dir.path(), &registry, &[0, 1], &again).unwrap();
            assert_eq!(drain(&again, 0), [Work::Key(b"a".to_vec())]);
        }
    }

    #[test]
    fn duplicates_are_compacted_and_overflow_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry();
        let repair = Repair::new(3);
        let mut spool = Spool::open(dir.path(), &registry, &[0, 1], &repair).unwrap();
        // The same key missed, copied and missed again, many times: the file stays small.
        for _ in 0..100 {
            repair.missed(0, b"k");
            spool.sync(0, &registry.name(0), &repair).unwrap();
            let work = repair.next(0).unwrap();
            repair.done(0, work, true);
            repair.missed(0, b"k");
        }
        spool.sync(0, &registry.name(0), &repair).unwrap();
        let path = spool.path(&registry.name(0));
        let lines = fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= spool.max_lines + 1, "{lines} lines");
        for key in [&b"a"[..], b"b", b"c", b"d"] {
            repair.missed(0, key);
        }
        spool.sync(0, &registry.name(0), &repair).unwrap();
        let records = spool_file::read(&path).unwrap().records;
        assert!(records.contains(&Record::FlushAndResync), "{records:?}");
    }

    #[test]
    fn work_in_progress_survives_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry();
        let repair = Repair::new(10);
        let mut spool = Spool::open(dir.path(), &registry, &[0, 1], &repair).unwrap();
        repair.missed(0, b"a");
        let work = repair.next(0).unwrap();
        // Rewritten while the key is being copied, and the copy then fails.
        spool.sync(0, &registry.name(0), &repair).unwrap();
        repair.done(0, work, false);
        let again = Repair::new(10);
        Spool::open(dir.path(), &registry, &[0, 1], &again).unwrap();
        assert_eq!(drain(&again, 0), [Work::Key(b"a".to_vec())]);
    }

    #[test]
    fn a_failed_write_keeps_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry();
        let repair = Repair::new(10);
        let mut spool = Spool::open(dir.path(), &registry, &[0, 1], &repair).unwrap();
        repair.missed(0, b"a");
        spool.sync(0, &registry.name(0), &repair).unwrap();
        // The next write fails (a file that takes no writes stands for a full disk).
        spool.files.get_mut(&0).unwrap().file = File::open(spool.path(&registry.name(0))).unwrap();
        repair.missed(0, b"b");
        spool.sync(0, &registry.name(0), &repair).unwrap_err();
        repair.missed(0, b"c");
        spool.sync(0, &registry.name(0), &repair).unwrap();
        let again = Repair::new(10);
        Spool::open(dir.path(), &registry, &[0, 1], &again).unwrap();
        let keys = [&b"a"[..], b"b", b"c"].map(|k| Work::Key(k.to_vec()));
        assert_eq!(drain(&again, 0), keys);
    }

    #[test]
    fn a_damaged_file_is_a_flush_and_resync_and_a_torn_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry();
        let line = |record: Record| {
            let mut text = Vec::new();
            spool_file::encode(&record, &mut text);
            String::from_utf8(text).unwrap()
        };
        let (a, b) = (line(Record::Key(b"a".to_vec())), line(Record::Key(b"b".to_vec())));
        let header = |name: &str| String::from_utf8(spool_file::header(name)).unwrap();
        // Server 0: a record cut short at the end. Server 1: one cut short in the middle.
        let cut = &b[..b.len() - 3];
        fs::write(dir.path().join(file_name(&registry.name(0))), format!("{}{a}{cut}", header(&registry.name(0))))
            .unwrap();
        fs::write(dir.path().join(file_name(&registry.name(1))), format!("{}{cut}{a}", header(&registry.name(1))))
            .unwrap();
        fs::write(dir.path().join("x.spool"), "not a spool\n").unwrap();
        fs::write(dir.path().join("y.spool"), format!("{}{a}", header("elsewhere:1"))).unwrap();
        let repair = Repair::new(10);
        Spool::open(dir.path(), &registry, &[0, 1], &repair).unwrap();
        assert_eq!(drain(&repair, 0), [Work::Key(b"a".to_vec())]);
        assert_eq!(drain(&repair, 1), [Work::Resync { flush_first: true }]);
        assert!(dir.path().join("x.spool").exists() && dir.path().join("y.spool").exists());
        // A file whose header is gone is known by its name.
        fs::write(dir.path().join(file_name(&registry.name(0))), "garbage\n").unwrap();
        let repair = Repair::new(10);
        Spool::open(dir.path(), &registry, &[0, 1], &repair).unwrap();
        assert_eq!(drain(&repair, 0), [Work::Resync { flush_first: true }]);
    }
}
