//! `crd-puller`: CRDs of a cluster's resources, from its discovery and OpenAPI (see
//! `kcp_physical::puller`); also `kubectl kcp crd pull`.

fn main() -> std::process::ExitCode {
    kcp_cli::puller_main()
}
