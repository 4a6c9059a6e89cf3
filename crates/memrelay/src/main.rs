//! The `memrelay` binary: parses the command line and runs the chosen engine.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Parser;
use memrelay::config::{Args, Config, Engine};

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line, not clap's usage block: scripts read this.
            let message = e.to_string();
            let first = message.lines().next().unwrap_or("bad arguments").trim_start_matches("error: ");
            eprintln!("memrelay: error: {first} (see --help)");
            return ExitCode::from(2);
        }
    };
    let config = match Config::from_args(args) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("memrelay: error: {message}");
            return ExitCode::from(2);
        }
    };
    let shutdown = Arc::new(AtomicBool::new(false));
    let result = match config.args.engine {
        Engine::Pool => memrelay::pool::run(config, shutdown),
        Engine::Evented => memrelay::evented::run(config, shutdown),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("memrelay: error: {message}");
            ExitCode::FAILURE
        }
    }
}
