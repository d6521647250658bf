//! The trees of a snapshot, rebuilt only where something changed: a directory none of whose
//! files was added, removed or changed (content or mode) since the session's last snapshot
//! keeps the tree id that snapshot's memo recorded for it, so a change deep in the work tree
//! rebuilds and writes only the trees on its path (git's cache-tree does the same). Writes
//! only tree objects into the store.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;

use super::memo::Known;
use super::object::{Mode, Objects, Oid};

/// The tree id of every directory of a snapshot (`/`-separated, `""` the root).
pub(super) type Trees = BTreeMap<String, Oid>;

/// The trees of a snapshot.
#[derive(Debug)]
pub(super) struct Built {
    /// The root tree.
    pub root: Oid,
    /// Every directory's tree.
    pub trees: Trees,
    /// The directories whose tree was rebuilt (not taken from the last snapshot), sorted.
    #[cfg_attr(not(test), allow(dead_code))] // what the tests check
    pub rebuilt: Vec<String>,
}

type Entries = Vec<(Vec<u8>, Mode, Oid)>;

/// Writes the trees of `files` (paths `/`-separated). `old` is the last snapshot's trees and
/// `changed` the paths added, removed or changed since it: a directory no changed path lies
/// under keeps its tree from `old`. A directory `old` does not know is rebuilt with all of
/// its ancestors (a damaged or older memo then costs a full rebuild, never a wrong tree).
pub(super) fn write(
    files: &BTreeMap<String, Known>,
    old: &Trees,
    changed: &[String],
    objects: &Objects,
) -> io::Result<Built> {
    let mut dirty: BTreeSet<&str> = BTreeSet::new();
    for path in changed {
        mark(&mut dirty, parent(path));
    }
    // Every directory of the new snapshot (each file's and their ancestors).
    let mut dirs: BTreeSet<&str> = BTreeSet::from([""]);
    let mut last = None;
    for path in files.keys() {
        let dir = parent(path);
        if last != Some(dir) {
            last = Some(dir);
            mark(&mut dirs, dir);
        }
    }
    let unknown: Vec<&str> = dirs
        .iter()
        .copied()
        .filter(|d| !dirty.contains(d) && !old.contains_key(*d))
        .collect();
    for dir in unknown {
        mark(&mut dirty, dir);
    }
    // The entries of the directories to rebuild: their files, then their subdirectories.
    let mut entries: HashMap<&str, Entries> = dirty
        .iter()
        .filter(|d| dirs.contains(*d))
        .map(|d| (*d, Vec::new()))
        .collect();
    let mut last: Option<(&str, bool)> = None;
    for (path, k) in files {
        let dir = parent(path);
        let wanted = match last {
            Some((d, wanted)) if d == dir => wanted,
            _ => entries.contains_key(dir),
        };
        last = Some((dir, wanted));
        if let (true, Some(list)) = (wanted, entries.get_mut(dir)) {
            list.push((name(path).as_bytes().to_vec(), k.mode, k.id));
        }
    }
    // A clean directory keeps its tree; one under a rebuilt directory is an entry of it.
    let mut trees = Trees::new();
    for dir in &dirs {
        if entries.contains_key(dir) {
            continue;
        }
        let Some(id) = old.get(*dir) else { continue };
        trees.insert((*dir).to_string(), *id);
        if let Some(list) = entries.get_mut(parent(dir)) {
            list.push((name(dir).as_bytes().to_vec(), Mode::Tree, *id));
        }
    }
    let mut order: Vec<&str> = entries.keys().copied().collect();
    // Deepest first: a directory's rebuilt subtrees are entries of it before it is built.
    order.sort_by_key(|d| std::cmp::Reverse(depth(d)));
    for dir in &order {
        let mut list = entries.remove(dir).unwrap_or_default();
        let id = objects.tree(&mut list)?;
        trees.insert((*dir).to_string(), id);
        if !dir.is_empty() {
            if let Some(list) = entries.get_mut(parent(dir)) {
                list.push((name(dir).as_bytes().to_vec(), Mode::Tree, id));
            }
        }
    }
    let root = match trees.get("") {
        Some(id) => *id,
        None => objects.tree(&mut [])?,
    };
    let mut rebuilt: Vec<String> = order.into_iter().map(str::to_string).collect();
    rebuilt.sort();
    Ok(Built {
        root,
        trees,
        rebuilt,
    })
}

/// The directory of `path` (`""` at the top).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The last component of `path`.
fn name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

fn depth(dir: &str) -> usize {
    match dir {
        "" => 0,
        d => d.matches('/').count() + 1,
    }
}

/// Adds `dir` and its ancestors (up to the root `""`) to `set`.
fn mark<'a>(set: &mut BTreeSet<&'a str>, mut dir: &'a str) {
    while set.insert(dir) && !dir.is_empty() {
        dir = parent(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::checkpoint::memo::Sig;

    fn files(list: &[(&str, &str)], objects: &Objects) -> BTreeMap<String, Known> {
        let sig = Sig {
            size: 0,
            mtime: (0, 0),
            ctime: (0, 0),
            ino: 0,
            dev: 0,
            mode: 0,
        };
        list.iter()
            .map(|(path, body)| {
                let id = objects.blob(body.as_bytes()).unwrap();
                let known = Known {
                    mode: Mode::File,
                    id,
                    sig,
                    racy: false,
                };
                (path.to_string(), known)
            })
            .collect()
    }

    /// The paths whose entry differs between `a` and `b`.
    fn changed(a: &BTreeMap<String, Known>, b: &BTreeMap<String, Known>) -> Vec<String> {
        let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        keys.into_iter()
            .filter(|k| a.get(*k).map(|k| k.id) != b.get(*k).map(|k| k.id))
            .cloned()
            .collect()
    }

    const TREE: [(&str, &str); 6] = [
        ("top.txt", "top"),
        ("a/x.txt", "x"),
        ("a/b/e.txt", "e"),
        ("a/b/c/d.txt", "d"),
        ("a/b2/y.txt", "y"),
        ("f/g.txt", "g"),
    ];

    #[test]
    fn a_change_deep_in_the_tree_rebuilds_exactly_the_trees_on_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::new(dir.path());
        let before = files(&TREE, &objects);
        let all: Vec<String> = before.keys().cloned().collect();
        let first = write(&before, &Trees::new(), &all, &objects).unwrap();
        let dirs = ["", "a", "a/b", "a/b/c", "a/b2", "f"];
        assert_eq!(first.rebuilt, dirs);
        assert_eq!(first.trees.keys().collect::<Vec<_>>(), dirs);
        let mut list = TREE.to_vec();
        list[3].1 = "d changed";
        let after = files(&list, &objects);
        let second = write(&after, &first.trees, &changed(&before, &after), &objects).unwrap();
        assert_eq!(second.rebuilt, ["", "a", "a/b", "a/b/c"]);
        for dir in dirs {
            let same = first.trees[dir] == second.trees[dir];
            assert_eq!(same, ["a/b2", "f"].contains(&dir), "{dir}");
        }
        // The same trees as built from nothing.
        let whole = write(&after, &Trees::new(), &[], &objects).unwrap();
        assert_eq!((whole.root, &whole.trees), (second.root, &second.trees));
        assert_eq!(second.root, second.trees[""]);
        // Nothing changed: nothing rebuilt, the same root.
        let third = write(&after, &second.trees, &[], &objects).unwrap();
        assert!(third.rebuilt.is_empty());
        assert_eq!(third.root, second.root);
    }

    #[test]
    fn an_added_and_a_removed_directory_rebuild_their_parents_only() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::new(dir.path());
        let before = files(&TREE, &objects);
        let all: Vec<String> = before.keys().cloned().collect();
        let first = write(&before, &Trees::new(), &all, &objects).unwrap();
        // a/b/c goes (its only file removed), n/m comes.
        let mut list: Vec<(&str, &str)> = TREE.iter().copied().filter(|f| f.1 != "d").collect();
        list.push(("n/m/new.txt", "new"));
        let after = files(&list, &objects);
        let second = write(&after, &first.trees, &changed(&before, &after), &objects).unwrap();
        assert_eq!(second.rebuilt, ["", "a", "a/b", "n", "n/m"]);
        let dirs: Vec<&String> = second.trees.keys().collect();
        assert_eq!(dirs, ["", "a", "a/b", "a/b2", "f", "n", "n/m"]);
        let whole = write(&after, &Trees::new(), &[], &objects).unwrap();
        assert_eq!((whole.root, &whole.trees), (second.root, &second.trees));
        // Everything removed: the empty tree.
        let empty = BTreeMap::new();
        let gone = write(&empty, &second.trees, &changed(&after, &empty), &objects).unwrap();
        assert_eq!(
            gone.root.to_string(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }
}
