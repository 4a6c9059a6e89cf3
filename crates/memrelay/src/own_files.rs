//! memrelay's own files (the configuration file, the auth files, the TLS files, the repair spool
//! and its identities) are opened only as regular files and read only up to a size: a FIFO, a
//! device or a directory put in a file's place is refused at once (its open does not wait for a
//! writer, `O_NONBLOCK`), and so is a file larger than it could sensibly be, with one line that
//! names the file and why. So neither start-up nor a reload can hang on a FIFO or fill memory
//! from `/dev/zero`, and a refused file on reload keeps the generation in force. `/dev/null` is
//! the one device read (as empty): `--check-config /dev/null` checks a command line alone.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest configuration file, auth file or PEM file read (each is a few kilobytes).
pub const MAX_SETTINGS_FILE: u64 = 16 << 20;

/// The largest repair spool file read: a set at its bound of keys (250-byte keys in base64 and
/// their CRCs) with room to spare.
pub const MAX_SPOOL_FILE: u64 = 1 << 30;

/// The bytes of the regular file at `path`, at most `limit` of them; an error (`InvalidInput`)
/// says why a file that is not regular or is larger is refused.
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = File::options().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let metadata = file.metadata()?;
    if is_dev_null(&metadata) {
        // `--check-config /dev/null`: the usual way to say "no file", read as empty.
        return Ok(Vec::new());
    }
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a regular file ({}): memrelay reads only regular files", kind(&metadata)),
        ));
    }
    if metadata.len() > limit {
        return Err(too_large(metadata.len(), limit));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        // It grew while it was read.
        return Err(too_large(bytes.len() as u64, limit));
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read(path, limit)?).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Whether `metadata` is the null device's (whatever path names it).
fn is_dev_null(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    metadata.file_type().is_char_device()
        && std::fs::metadata("/dev/null").is_ok_and(|null| null.rdev() == metadata.rdev())
}

fn too_large(len: u64, limit: u64) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{len} bytes, more than the {limit} memrelay reads"))
}

fn kind(metadata: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = metadata.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_devices_directories_and_large_files_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would wait for one for ever.
        let error = read(&fifo, MAX_SETTINGS_FILE).unwrap_err();
        assert!(error.to_string().contains("a FIFO"), "{error}");
        assert!(read(Path::new("/dev/zero"), MAX_SETTINGS_FILE).unwrap_err().to_string().contains("a device"));
        // The null device is "no file": empty.
        assert!(read(Path::new("/dev/null"), MAX_SETTINGS_FILE).unwrap().is_empty());
        assert!(read(dir.path(), MAX_SETTINGS_FILE).unwrap_err().to_string().contains("a directory"));
        let large = dir.path().join("large");
        std::fs::write(&large, vec![b'x'; 2048]).unwrap();
        let error = read(&large, 1024).unwrap_err();
        assert!(error.to_string().contains("2048 bytes, more than the 1024"), "{error}");
        assert_eq!(read(&large, 4096).unwrap().len(), 2048);
        assert_eq!(read(&dir.path().join("missing"), 10).unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
