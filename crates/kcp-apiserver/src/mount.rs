//! Mount points: the URL trees the server answers, each with its own chain of layers in front
//! of the same handlers.
//!
//! Authentication, the in-flight limits and the request timeout are the server's, in front of
//! every mount ([`crate::router`]). What follows depends on the tree: how its paths name a
//! logical cluster, whose identity a request has there, and who may do what. A mount lists
//! those steps as [`Layer`]s, in order; the router runs them ([`crate::router::Router`]) and
//! the first that answers ends the request. The trees: [`CLUSTERS`] (`/clusters/<path>/...`
//! and the bare paths), [`APIEXPORT`] (`/services/apiexport/...`, an export's virtual
//! workspace), [`INITIALIZING`] and [`TERMINATING`] (`/services/initializingworkspaces/...`,
//! `/services/terminatingworkspaces/...`), the last three views of
//! [`crate::virtual_workspaces`] with their own resolution and authorization.

/// One step of a mount's chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// A service account's request without a cluster path is for its own logical cluster
    /// (in-cluster clients know no `/clusters/` prefix), as kcp rewrites it.
    ServiceAccountCluster,
    /// A workspace path (`root:org:team`) resolved to its logical cluster.
    ResolvePath,
    /// A user scoped to other clusters (a service account outside its own) is a foreign
    /// identity here.
    ForeignIdentity,
    /// Acting as another user (`kubectl --as`), if the caller may.
    Impersonation,
    /// `workspaces/~`: the user's home workspace, made when the authorizer allows it.
    HomeWorkspace,
    /// The authorizer's decision for the request in its logical cluster.
    Authorize,
    /// A virtual workspace's view: its authorization (verbs on the view's object), and the
    /// request rewritten to what the view lets it see.
    VirtualWorkspace,
}

/// A URL tree and its chain.
#[derive(Debug)]
pub struct Mount {
    /// For logs and errors.
    pub name: &'static str,
    /// The steps a request of this tree passes before the handlers, in order.
    pub layers: &'static [Layer],
}

/// `/clusters/<path or name>/...`, and the paths without a cluster (the root cluster's
/// documents, a service account's own cluster).
pub const CLUSTERS: Mount = Mount {
    name: "clusters",
    layers: &[
        Layer::ServiceAccountCluster,
        Layer::ResolvePath,
        Layer::ForeignIdentity,
        Layer::Impersonation,
        Layer::HomeWorkspace,
        Layer::Authorize,
    ],
};

/// `/services/apiexport/<cluster>/<export>/clusters/<consumer or *>/...`.
pub const APIEXPORT: Mount = Mount {
    name: "apiexport",
    layers: &[Layer::VirtualWorkspace],
};

/// The mount that answers `path`, its view if it is a virtual workspace's, and the path its
/// handlers read (`/clusters/...`).
pub fn of(
    path: &str,
) -> (
    &'static Mount,
    Option<crate::virtual_workspaces::View>,
    &str,
) {
    match crate::virtual_workspaces::route(path) {
        Some((view, inner)) => (&APIEXPORT, Some(view), inner),
        None => (&CLUSTERS, None, path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_tree_resolves_then_finds_the_identity_then_authorizes() {
        let (mount, view, _) = of("/clusters/root/api/v1/namespaces");
        assert!(view.is_none());
        assert_eq!(mount.name, "clusters");
        let at = |layer| mount.layers.iter().position(|l| *l == layer).unwrap();
        // The path first (a service account's own cluster where none is named), then who the
        // user is there, then what they may do.
        assert!(at(Layer::ServiceAccountCluster) < at(Layer::ResolvePath));
        assert!(at(Layer::ResolvePath) < at(Layer::ForeignIdentity));
        assert!(at(Layer::ForeignIdentity) < at(Layer::Impersonation));
        assert!(at(Layer::Impersonation) < at(Layer::HomeWorkspace));
        assert_eq!(mount.layers.last(), Some(&Layer::Authorize));
    }

    #[test]
    fn an_export_view_is_its_own_tree() {
        let (mount, view, inner) = of("/services/apiexport/c/e/clusters/*/apis");
        assert_eq!(mount.name, "apiexport");
        assert!(view.is_some());
        assert_eq!(inner, "/clusters/*/apis");
    }
}
