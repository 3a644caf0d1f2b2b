//! The `mnemo` binary: a thin shell over the library's command line.

fn main() -> std::process::ExitCode {
    mnemo::cli::main()
}
