//! The `keel` binary: parse, run, map to an exit status. Nothing else.

fn main() -> std::process::ExitCode {
    let exit = keel::main();
    std::process::ExitCode::from(exit.code().clamp(0, 255) as u8)
}
