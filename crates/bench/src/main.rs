//! `memrelay-bench`: see the crate README for the options and the output format.

fn main() {
    std::process::exit(memrelay_bench::run::main());
}
