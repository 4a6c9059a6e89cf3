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
    if argv.get(1).is_some_and(|a| a == "route") {
        return route(&argv);
    }
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
        let servers: Vec<&str> = settings.all_servers().map(|s| s.name.as_str()).collect();
        let pools = match settings.pools.len() {
            0 => String::new(),
            n => format!(" in {} pools, {} routes", n + 1, settings.routes.len()),
        };
        println!("memrelay: {} is valid: {} servers{pools} ({})", file.display(), servers.len(), servers.join(", "));
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

/// `memrelay route [--config FILE] [OPTIONS] OP KEY`: prints the servers a request of OP for KEY
/// would go to under that configuration, one `host:port` per line, in the order they would be
/// asked (what `get __memrelay__.route(OP,KEY)` answers a running memrelay), without starting a
/// proxy. Exits 2 on a bad configuration, operation or key.
fn route(argv: &[std::ffi::OsString]) -> ExitCode {
    let fail = |message: &str| {
        eprintln!("memrelay route: error: {}", memrelay::printable(message));
        ExitCode::from(2)
    };
    if argv.len() < 4 {
        return fail("usage: memrelay route [--config FILE] [OPTIONS] OP KEY");
    }
    let (options, asked) = argv.split_at(argv.len() - 2);
    let mut command_line = vec![argv[0].clone()];
    command_line.extend_from_slice(&options[2..]);
    let settings = match read_settings(command_line) {
        Ok(settings) => settings,
        Err(message) => return fail(&message),
    };
    let servers: Vec<&memrelay::settings::Endpoint> = settings.all_servers().collect();
    let router = match memrelay::routing::Router::build(&settings, &(0..servers.len()).collect::<Vec<_>>()) {
        Ok(router) => router,
        Err(message) => return fail(&message),
    };
    let (op, key) = (asked[0].as_encoded_bytes(), asked[1].as_encoded_bytes());
    match memrelay::routing::explain::servers_for(&router, op, key, &|_| false) {
        Ok(ids) => {
            for id in ids {
                println!("{}", servers[id].address);
            }
            ExitCode::SUCCESS
        }
        Err(message) => fail(&message),
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
