//! `syncer`: one workspace's objects assigned to a physical cluster synced down, their status
//! up (see `kcp_cli::syncer`); the cluster-controller runs the same in push mode.

fn main() -> std::process::ExitCode {
    kcp_cli::syncer::main()
}
