//! `kubectl ws`: moves between kcp workspaces (see `kcp_cli`).

fn main() -> std::process::ExitCode {
    kcp_cli::ws_main()
}
