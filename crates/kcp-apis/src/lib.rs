//! What kcp serves, as data: the catalogue of built-in resources every logical cluster has
//! ([`builtin`]), their OpenAPI schemas ([`schema`]), the resources a CRD serves ([`custom`])
//! and kcp's own kinds (Workspace, WorkspaceType, LogicalCluster: [`system`]).
//!
//! Pure: no IO, no HTTP, no storage. Consumers (discovery, the registry) read the tables.

pub mod builtin;
pub mod custom;
pub mod frozen;
pub mod messages;
pub mod schema;
pub mod system;
