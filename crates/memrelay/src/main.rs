//! The `memrelay` binary: parses the command line into typed settings and runs the chosen engine.

mod cli;
mod config_file;

use std::process::ExitCode;

use clap::Parser;

/// Signals are caught from before `main`: the loader runs this constructor before Rust's runtime
/// starts (a SIGHUP a few milliseconds after start must not end the process: issue 32).
#[used]
#[link_section = ".init_array"]
static CATCH_SIGNALS_FIRST: extern "C" fn() = catch_signals_first;

extern "C" fn catch_signals_first() {
    // An error is reported by main's call, which tries again.
    let _ = memrelay::catch_signals_from_start();
}

fn main() -> ExitCode {
    // First (done already by the constructor above): a SIGHUP, SIGINT or SIGTERM from now on is
    // noted, never the default action (death), in the milliseconds before the engine's own
    // handlers are in place.
    if let Err(e) = memrelay::catch_signals_from_start() {
        eprintln!("memrelay: error: cannot handle signals: {e}");
        return ExitCode::FAILURE;
    }
    exit_on_panic();
    memrelay::memory::configure_allocator();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let expanded = match config_file::expand(argv.clone()) {
        Ok(expanded) => expanded,
        Err(message) => {
            eprintln!("memrelay: error: {}", memrelay::printable(&message));
            return ExitCode::from(2);
        }
    };
    let args = match cli::Args::try_parse_from(&expanded.argv) {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line, not clap's usage block: scripts read this.
            eprintln!("memrelay: error: {} (see --help)", memrelay::printable(&cli::error_line(&e)));
            return ExitCode::from(2);
        }
    };
    let settings = match args.into_settings() {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("memrelay: error: {}", memrelay::printable(&message));
            return ExitCode::from(2);
        }
    };
    // The checks a start makes before it binds anything: --check-config runs them too, and a
    // start they refuse exits 2 (bad input) like a bad option.
    if let Err(error) = memrelay::validate(&settings) {
        eprintln!("memrelay: error: {}", memrelay::printable(&error.to_string()));
        return ExitCode::from(2);
    }
    if let Some(file) = expanded.check_only {
        let servers: Vec<&str> = settings.servers.iter().map(|s| s.name.as_str()).collect();
        println!("memrelay: {} is valid: {} servers ({})", file.display(), servers.len(), servers.join(", "));
        return ExitCode::SUCCESS;
    }
    // SIGHUP reads the file again under the same command line (and the auth file and the TLS
    // certificates, also when there is no configuration file).
    let rereadable = expanded.file.is_some() || settings.access.auth_file.is_some() || settings.tls.is_some();
    let reload: Option<memrelay::reload::Source> = match rereadable {
        true => Some(Box::new(move || read_settings(argv.clone()))),
        false => None,
    };
    match memrelay::run_reloading(settings, reload) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("memrelay: error: {}", memrelay::printable(&error.to_string()));
            // Bad input exits 2, as a bad option does; a start the machine refused (a port in
            // use), 1.
            if error.is_configuration() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The settings `argv` stands for, with its `--config` file read again (a reload); the error is
/// one line.
fn read_settings(argv: Vec<std::ffi::OsString>) -> Result<memrelay::Settings, String> {
    let expanded = config_file::expand(argv)?;
    let args = cli::Args::try_parse_from(&expanded.argv).map_err(|e| cli::error_line(&e))?;
    args.into_settings()
}

/// A panic in any thread ends the process with a non-zero status, so a supervisor restarts it.
/// Containing it instead would leave the state the thread shared (a server connection's queue of
/// outstanding replies, a client's place in it) unknown, and an event loop that died silently
/// would leave a process that is alive but serves nobody.
fn exit_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        eprintln!("memrelay: error: a thread panicked; exiting");
        std::process::exit(70);
    }));
}
