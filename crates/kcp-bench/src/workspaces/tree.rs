//! The shape of the benchmark's workspace tree: depth 3 under root. With `b = ⌈∛n⌉`: `b`
//! organizations in root, `b` teams in each, and the remaining workspaces spread as leaves over
//! the teams (round robin), so the tree holds exactly `n` (fewer levels when `n` is small).

/// One workspace to create: the path of its parent and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub parent: String,
    pub name: String,
}

impl Planned {
    pub fn path(&self) -> String {
        format!("{}:{}", self.parent, self.name)
    }
}

/// The workspaces of a tree of `n`, level by level (every parent in an earlier level).
pub fn plan(n: usize) -> Vec<Vec<Planned>> {
    let branching = (1..).find(|b: &usize| b * b * b >= n).unwrap_or(1);
    let mut levels: Vec<Vec<Planned>> = Vec::new();
    let mut left = n;
    let orgs: Vec<Planned> = (0..branching.min(left))
        .map(|i| Planned {
            parent: "root".into(),
            name: format!("org-{i}"),
        })
        .collect();
    left -= orgs.len();
    let mut teams = Vec::new();
    'teams: for i in 0..branching {
        for org in &orgs {
            if left == 0 {
                break 'teams;
            }
            teams.push(Planned {
                parent: org.path(),
                name: format!("team-{i}"),
            });
            left -= 1;
        }
    }
    let leaves: Vec<Planned> = (0..left)
        .map(|i| Planned {
            parent: teams[i % teams.len()].path(),
            name: format!("leaf-{}", i / teams.len()),
        })
        .collect();
    for level in [orgs, teams, leaves] {
        if !level.is_empty() {
            levels.push(level);
        }
    }
    levels
}

/// The workspaces of organizations of `org_size` each (`1,000 orgs of 1,000`): `n` in all,
/// counting the organizations, in two levels.
pub fn plan_orgs(n: usize, org_size: usize) -> Vec<Vec<Planned>> {
    let org_count = n.div_ceil(org_size + 1).max(1).min(n);
    let orgs: Vec<Planned> = (0..org_count)
        .map(|i| Planned {
            parent: "root".into(),
            name: format!("org-{i}"),
        })
        .collect();
    let members: Vec<Planned> = (0..n - org_count)
        .map(|i| Planned {
            parent: orgs[i / org_size.max(1) % org_count].path(),
            name: format!("ws-{}", i % org_size.max(1)),
        })
        .collect();
    [orgs, members]
        .into_iter()
        .filter(|level| !level.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn the_tree_has_exactly_n_workspaces_three_deep_with_parents_first() {
        for n in [1, 2, 9, 30, 1000, 10_000] {
            let levels = plan(n);
            let all: Vec<&Planned> = levels.iter().flatten().collect();
            assert_eq!(all.len(), n, "{n}");
            assert!(levels.len() <= 3);
            let mut known: HashSet<String> = HashSet::from(["root".to_string()]);
            for level in &levels {
                for w in level {
                    assert!(known.contains(&w.parent), "{n}: {w:?}");
                }
                known.extend(level.iter().map(Planned::path));
            }
            assert_eq!(known.len(), n + 1, "paths are unique");
        }
        for (n, org_size) in [(1, 5), (7, 2), (1_001_000, 1000), (50, 1000)] {
            let levels = plan_orgs(n, org_size);
            let all: Vec<&Planned> = levels.iter().flatten().collect();
            assert_eq!(all.len(), n, "{n}");
            let paths: HashSet<String> = all.iter().map(|w| w.path()).collect();
            assert_eq!(paths.len(), n, "paths are unique");
            for member in levels.get(1).into_iter().flatten() {
                assert!(paths.contains(&member.parent), "{member:?}");
            }
        }
        let orgs = plan_orgs(1_001_000, 1000);
        assert_eq!(orgs[0].len(), 1000);
        assert_eq!(
            orgs[1].iter().filter(|w| w.parent == "root:org-7").count(),
            1000
        );
        let levels = plan(10_000);
        assert_eq!(levels[0].len(), 22);
        assert_eq!(levels[1].len(), 484);
        assert_eq!(levels[2].len(), 10_000 - 22 - 484);
    }
}
