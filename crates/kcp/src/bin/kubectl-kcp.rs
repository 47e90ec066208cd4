//! `kubectl kcp`: kcp's kubectl plugin; `kubectl kcp ws` is `kubectl ws` (see `kcp_cli`).

fn main() -> std::process::ExitCode {
    kcp_cli::kcp_main()
}
