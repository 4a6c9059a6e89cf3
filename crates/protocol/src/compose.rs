//! Writing requests and replies into a caller-owned buffer (reused, so no allocation once warm).

use std::io::Write;

use crate::request::{Command, Request};

/// The request as memrelay forwards it to a server: composed from what was parsed, never the
/// client's bytes, in canonical form (one space between tokens, decimal numbers, `\r\n`), with
/// `noreply` as the caller asks. A server therefore reads exactly the request memrelay parsed,
/// however the client spelled it.
pub fn request(out: &mut Vec<u8>, request: &Request, buf: &[u8], noreply: bool) {
    let key = request.key(buf);
    match request.command {
        Command::Get | Command::Gets => retrieval(out, request.command, request.keys(buf)),
        c @ (Command::Gat | Command::Gats) => retrieval_touching(out, c, request.exptime, request.keys(buf)),
        Command::MetaNoop => out.extend_from_slice(b"mn\r\n"),
        Command::MetaDebug => {
            let flags: &[&[u8]] = if request.meta.base64 { &[b"b"] } else { &[] };
            meta(out, Command::MetaDebug, key, None, flags.iter().copied());
        }
        c if c.is_meta() => {
            let data = (c == Command::MetaSet).then(|| &buf[request.data.clone()]);
            if request.server_applies_quiet() {
                // Only the server knows whether its quiet mode speaks: `mn` ends what it says.
                meta(out, c, key, data, request.meta.flag_tokens(buf));
                out.extend_from_slice(b"mn\r\n");
                return;
            }
            // Quiet mode is memrelay's to apply: the servers always answer.
            let flags = request.meta.flag_tokens(buf).filter(|flag| flag[0] != b'q');
            meta(out, c, key, data, flags)
        }
        c if c.is_storage() => {
            let data = &buf[request.data.clone()];
            storage(out, c, key, request.flags, request.exptime, data, request.number, noreply)
        }
        c @ (Command::Incr | Command::Decr) => keyed(out, c, key, Some(request.number), noreply),
        Command::Touch => keyed(out, Command::Touch, key, Some(request.exptime), noreply),
        Command::Delete => keyed(out, Command::Delete, key, None::<u64>, noreply),
        Command::FlushAll => {
            keyless(out, Command::FlushAll, (request.exptime != 0).then_some(request.exptime), noreply)
        }
        Command::Verbosity => keyless(out, Command::Verbosity, Some(request.number), noreply),
        Command::CacheMemlimit => keyless(out, Command::CacheMemlimit, Some(request.number), noreply),
        c @ (Command::Version | Command::Quit) => keyless(out, c, None::<u64>, false),
        Command::Stats => {
            out.extend_from_slice(b"stats");
            for key in request.keys(buf) {
                out.push(b' ');
                out.extend_from_slice(key);
            }
            out.extend_from_slice(b"\r\n");
        }
        _ => unreachable!("every command composes"),
    }
}

/// `<mg|ms|md|ma|me> <key> [<datalen>] <flag>*\r\n[<data>\r\n]`: the data length and block for
/// `ms` only.
pub fn meta<'f>(
    out: &mut Vec<u8>,
    command: Command,
    key: &[u8],
    data: Option<&[u8]>,
    flags: impl IntoIterator<Item = &'f [u8]>,
) {
    out.extend_from_slice(command.name().as_bytes());
    out.push(b' ');
    out.extend_from_slice(key);
    if let Some(data) = data {
        number(out, data.len());
    }
    for flag in flags {
        out.push(b' ');
        out.extend_from_slice(flag);
    }
    out.extend_from_slice(b"\r\n");
    if let Some(data) = data {
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }
}

/// `get|gets <key> <key> …\r\n`
pub fn retrieval<'k>(out: &mut Vec<u8>, command: Command, keys: impl IntoIterator<Item = &'k [u8]>) {
    out.extend_from_slice(command.name().as_bytes());
    for key in keys {
        out.push(b' ');
        out.extend_from_slice(key);
    }
    out.extend_from_slice(b"\r\n");
}

/// `gat|gats <exptime> <key> <key> …\r\n`
pub fn retrieval_touching<'k>(
    out: &mut Vec<u8>,
    command: Command,
    exptime: i64,
    keys: impl IntoIterator<Item = &'k [u8]>,
) {
    out.extend_from_slice(command.name().as_bytes());
    number(out, exptime);
    for key in keys {
        out.push(b' ');
        out.extend_from_slice(key);
    }
    out.extend_from_slice(b"\r\n");
}

/// A storage command with its data block. `cas_unique` is written for `cas` only.
#[allow(clippy::too_many_arguments)]
pub fn storage(
    out: &mut Vec<u8>,
    command: Command,
    key: &[u8],
    flags: u32,
    exptime: i64,
    data: &[u8],
    cas_unique: u64,
    noreply: bool,
) {
    out.extend_from_slice(command.name().as_bytes());
    out.push(b' ');
    out.extend_from_slice(key);
    number(out, flags);
    number(out, exptime);
    number(out, data.len());
    if command == Command::Cas {
        number(out, cas_unique);
    }
    if noreply {
        out.extend_from_slice(b" noreply");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A one-key command with an optional number: `delete k`, `incr k 5`, `touch k 10` (a delta is
/// unsigned 64-bit, an exptime signed).
pub fn keyed(out: &mut Vec<u8>, command: Command, key: &[u8], value: Option<impl itoa::Integer>, noreply: bool) {
    out.extend_from_slice(command.name().as_bytes());
    out.push(b' ');
    out.extend_from_slice(key);
    if let Some(value) = value {
        number(out, value);
    }
    if noreply {
        out.extend_from_slice(b" noreply");
    }
    out.extend_from_slice(b"\r\n");
}

/// A command without a key: `flush_all [delay]`, `verbosity N`, `version`, `quit`, `stats`.
pub fn keyless(out: &mut Vec<u8>, command: Command, value: Option<impl itoa::Integer>, noreply: bool) {
    out.extend_from_slice(command.name().as_bytes());
    if let Some(value) = value {
        number(out, value);
    }
    if noreply {
        out.extend_from_slice(b" noreply");
    }
    out.extend_from_slice(b"\r\n");
}

/// ` <value>` in decimal, without going through `fmt` (this is on every forwarded request).
fn number(out: &mut Vec<u8>, value: impl itoa::Integer) {
    out.push(b' ');
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    let _ = write!(out, " {flags} {}", data.len());
    if let Some(cas) = cas {
        let _ = write!(out, " {cas}");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// `STAT <name> <value>\r\n`
pub fn stat(out: &mut Vec<u8>, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "STAT {name} {value}\r\n");
}

pub const END: &[u8] = b"END\r\n";
