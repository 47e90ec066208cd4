//! `deployment-splitter`: a workspace's Deployments assigned to no cluster split across its
//! Ready clusters (see `kcp_cli::splitter`); the cluster-controller runs the same.

fn main() -> std::process::ExitCode {
    kcp_cli::splitter::main()
}
