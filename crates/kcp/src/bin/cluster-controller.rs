//! `cluster-controller`: imports the APIs of the physical Clusters registered in kcp's
//! workspaces and negotiates them (see `kcp_cli::cluster_controller`); `kcp start` runs the
//! same controller unless `--install-cluster-controller=false`.

fn main() -> std::process::ExitCode {
    kcp_cli::cluster_controller::main()
}
