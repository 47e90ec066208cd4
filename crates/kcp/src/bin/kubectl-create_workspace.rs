//! `kubectl create-workspace`: kubectl runs `kubectl-create_workspace` for the dashed command
//! name (`kubectl-create-workspace` serves `kubectl create workspace`); see `kcp_cli`.

fn main() -> std::process::ExitCode {
    kcp_cli::create_workspace_main()
}
