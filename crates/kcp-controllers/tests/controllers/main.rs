//! The controllers' integration tests, all on the in-memory store with `Controllers` running,
//! built as one test binary (one link step) with one module per controller. Helpers the modules
//! share are in `support`.

mod crd_deletion;
mod namespace;
mod support;
mod workspaces;
