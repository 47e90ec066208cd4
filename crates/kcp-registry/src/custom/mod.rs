//! Custom resources: which ones each logical cluster serves ([`index`]) and how their objects
//! move between the version stored and the version served ([`convert`]); deleting a CRD
//! starts its termination (`deletion`). Their rule set (validation and defaulting by schema,
//! CEL rules) is `crate::kinds::custom`; pruning happens while decoding (`crate::validation`).

pub(crate) mod convert;
mod deletion;
pub(crate) mod index;

pub use convert::WebhookConverter;
pub use deletion::CLEANUP_FINALIZER;
pub use index::{condition_true, status_condition_true};
