//! `kubectl create workspace` (kubectl runs `kubectl-create-workspace` for it): creates a kcp
//! workspace (see `kcp_cli`).

fn main() -> std::process::ExitCode {
    kcp_cli::create_workspace_main()
}
