//! The repair sets on disk (`--repair-spool-dir DIR`), so that a memrelay restart does not forget
//! which replicas missed which writes: one append-only file per server, written by the repair
//! thread from what [`super::Repair`] collected since its last turn, emptied when the server is up
//! to date, and read back at start before any client is accepted.
//!
//! A file is `memrelay-repair-spool 1 <server name>` and then one record a line: `K <key in
//! base64>` (the key missed a write), `R` (the server restarted: a resync), `F` (its set
//! overflowed: flush and resync). Records reach the file within one turn of the repair thread
//! (20 ms); a memrelay that dies inside that window forgets those. Duplicates (a key missed
//! again after it was copied) are compacted away once the file holds more lines than the set's
//! bound allows, by rewriting it from the set.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use base64::Engine;

use crate::upstream::registry::Registry;
use crate::upstream::repair_set::{Record, Repair};

const MAGIC: &str = "memrelay-repair-spool 1";

pub(crate) struct Spool {
    dir: PathBuf,
    files: HashMap<usize, SpoolFile>,
    /// More lines than this in a file and it is rewritten from the set.
    max_lines: usize,
}

struct SpoolFile {
    file: File,
    lines: usize,
}

impl Spool {
    /// Opens `dir` (created if missing) and puts every record of the current servers' files back
    /// into `repair`; files of servers not configured now are left alone (with a log line).
    pub(crate) fn open(dir: &Path, registry: &Registry, servers: &[usize], repair: &Repair) -> io::Result<Spool> {
        fs::create_dir_all(dir)?;
        repair.spool_records();
        let spool = Spool { dir: dir.to_path_buf(), files: HashMap::new(), max_lines: 2 * repair.max_keys + 16 };
        let by_name: HashMap<String, usize> = servers.iter().map(|&id| (registry.name(id), id)).collect();
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "spool") {
                continue;
            }
            let (name, records) = match read(&path) {
                Ok(read) => read,
                Err(error) => {
                    eprintln!("memrelay: repair spool {} is unreadable and left alone: {error}", path.display());
                    continue;
                }
            };
            let Some(&server) = by_name.get(&name) else {
                eprintln!(
                    "memrelay: repair spool {} is for server {name}, which is not configured; left alone",
                    path.display()
                );
                continue;
            };
            let keys = records.iter().filter(|r| matches!(r, Record::Key(_))).count();
            eprintln!(
                "memrelay: server {name} missed writes before memrelay stopped: {keys} keys to repair (from {})",
                path.display()
            );
            fs::remove_file(&path)?;
            // Put back into the set, they are written out again on the repair thread's first turn.
            for record in records {
                repair.replay(server, record);
            }
        }
        Ok(spool)
    }

    /// Writes what `server`'s set gained since the last turn, or empties its file once the
    /// server is up to date.
    pub(crate) fn sync(&mut self, server: usize, name: &str, repair: &Repair) -> io::Result<()> {
        let (records, repairing) = repair.take_records(server);
        if records.is_empty() {
            match self.files.get_mut(&server) {
                Some(spool_file) if !repairing && spool_file.lines > 0 => {
                    spool_file.file.set_len(0)?;
                    spool_file.lines = 0;
                    write_header(&mut spool_file.file, name)?;
                }
                _ => {}
            }
            return Ok(());
        }
        let path = self.path(name);
        let spool_file = match self.files.entry(server) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let mut file = OpenOptions::new().create(true).truncate(true).write(true).open(&path)?;
                write_header(&mut file, name)?;
                entry.insert(SpoolFile { file, lines: 0 })
            }
        };
        let compact = spool_file.lines + records.len() > self.max_lines;
        let records = if compact { repair.snapshot(server) } else { records };
        if compact {
            spool_file.file.set_len(0)?;
            spool_file.lines = 0;
            write_header(&mut spool_file.file, name)?;
        }
        let mut text = Vec::new();
        for record in &records {
            encode(record, &mut text);
        }
        spool_file.file.write_all(&text)?;
        spool_file.lines += records.len();
        Ok(())
    }

    /// The file of the server named `name`: its name made safe for a path, and a hash of the
    /// name so that two names made the same stay apart.
    fn path(&self, name: &str) -> PathBuf {
        let safe: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
        let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        self.dir.join(format!("{safe}-{:08x}.spool", hash as u32))
    }
}

fn write_header(file: &mut File, name: &str) -> io::Result<()> {
    use std::io::Seek;
    file.seek(io::SeekFrom::Start(0))?;
    file.write_all(format!("{MAGIC} {name}\n").as_bytes())
}

fn encode(record: &Record, out: &mut Vec<u8>) {
    match record {
        Record::Key(key) => {
            out.extend_from_slice(b"K ");
            out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(key).as_bytes());
        }
        Record::Resync => out.push(b'R'),
        Record::FlushAndResync => out.push(b'F'),
    }
    out.push(b'\n');
}

/// A spool file's server name and records. A last line cut short (memrelay died writing it) is
/// dropped; any other line that is not a record is an error.
fn read(path: &Path) -> io::Result<(String, Vec<Record>)> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut reader = BufReader::new(File::open(path)?);
    let mut header = String::new();
    reader.read_line(&mut header)?;
    let name = header
        .strip_suffix('\n')
        .and_then(|h| h.strip_prefix(MAGIC))
        .and_then(|rest| rest.strip_prefix(' '))
        .ok_or_else(|| bad(format!("the first line is not `{MAGIC} <server name>`")))?
        .to_string();
    let mut records = Vec::new();
    let mut line = Vec::new();
    for number in 2.. {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let Some(text) = line.strip_suffix(b"\n") else { break };
        let record = match text {
            b"R" => Record::Resync,
            b"F" => Record::FlushAndResync,
            _ => {
                let key = text
                    .strip_prefix(b"K ")
                    .and_then(|k| base64::engine::general_purpose::STANDARD.decode(k).ok())
                    .filter(|k| !k.is_empty() && k.len() <= 250)
                    .ok_or_else(|| bad(format!("line {number} is not a record")))?;
                Record::Key(key)
            }
        };
        records.push(record);
    }
    Ok((name, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Endpoint;

    fn registry() -> Registry {
        Registry::new(&[Endpoint::local(1), Endpoint::local(2)])
    }

    #[test]
    fn records_survive_a_restart_and_the_file_empties_once_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let (registry, servers) = (registry(), [0, 1]);
        let repair = Repair::new(10);
        let mut spool = Spool::open(dir.path(), &registry, &servers, &repair).unwrap();
        repair.missed(1, b"a");
        repair.missed(1, b"b c");
        repair.restarted(1);
        spool.sync(1, &registry.name(1), &repair).unwrap();
        spool.sync(0, &registry.name(0), &repair).unwrap();
        let files: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(files.len(), 1, "only the server that missed writes has a file");

        // A new memrelay over the same folder: server 1 is being repaired, with the same work.
        let again = Repair::new(10);
        let mut spool = Spool::open(dir.path(), &registry, &servers, &again).unwrap();
        assert!(again.is_repairing(1) && !again.is_repairing(0));
        assert_eq!(again.next(1), Some(crate::upstream::repair_set::Work::Resync { flush_first: false }));
        again.done(1, crate::upstream::repair_set::Work::Resync { flush_first: false }, true);
        let mut keys = Vec::new();
        while let Some(work) = again.next(1) {
            if let crate::upstream::repair_set::Work::Key(key) = &work {
                keys.push(key.clone());
            }
            again.done(1, work, true);
        }
        assert_eq!(keys, [b"a".to_vec(), b"b c".to_vec()]);
        // Written out on the first turn, emptied on the next once the server is up to date.
        spool.sync(1, &registry.name(1), &again).unwrap();
        spool.sync(1, &registry.name(1), &again).unwrap();
        let third = Repair::new(10);
        Spool::open(dir.path(), &registry, &servers, &third).unwrap();
        assert!(!third.is_repairing(1), "the file of an up-to-date server is empty");
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
        let (_, records) = read(&path).unwrap();
        assert!(records.contains(&Record::FlushAndResync), "{records:?}");
    }

    #[test]
    fn bad_files_are_left_alone_and_a_cut_last_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry();
        fs::write(dir.path().join("x.spool"), "not a spool\n").unwrap();
        fs::write(dir.path().join("y.spool"), format!("{MAGIC} elsewhere:1\nK YQ==\n")).unwrap();
        fs::write(dir.path().join("z.spool"), format!("{MAGIC} {}\nK YQ==\nK Yg", registry.name(0))).unwrap();
        let repair = Repair::new(10);
        Spool::open(dir.path(), &registry, &[0, 1], &repair).unwrap();
        assert_eq!(repair.counts(0).pending, 1, "the cut record is dropped");
        assert!(dir.path().join("x.spool").exists() && dir.path().join("y.spool").exists());
        assert!(!dir.path().join("z.spool").exists(), "read back into the set");
    }
}
