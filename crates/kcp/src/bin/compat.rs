//! `compat`: whether a new CRD's schema accepts everything an old one's does (see
//! `kcp_cli::compat`); also `kubectl kcp crd compat`.

fn main() -> std::process::ExitCode {
    kcp_cli::compat_main()
}
