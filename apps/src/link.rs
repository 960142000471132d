//! Watching the ports' links while an app runs: each change is told once
//! (down with the driver's reason when it has one, up again), not every
//! period, and a port whose link was down from the start is not news.
use rpmd_pmd::Port;

/// One port's link as last seen: up, and why not if the driver says.
pub type LinkState = (bool, Option<String>);

/// Reads each port's link and the driver's reason for a down one.
pub fn states(ports: &[Box<dyn Port>]) -> Vec<LinkState> {
    ports
        .iter()
        .map(|p| {
            let up = p.link().up;
            (up, if up { None } else { p.last_error() })
        })
        .collect()
}

/// The links seen at the last look.
#[derive(Default)]
pub struct LinkWatch {
    seen: Vec<bool>,
}

impl LinkWatch {
    /// Lines for the links that changed since the last look, each naming
    /// the port by `ids` and `names`; the first look only records.
    pub fn changes(&mut self, now: &[LinkState], ids: &[usize], names: &[String]) -> Vec<String> {
        let first = self.seen.is_empty();
        let mut out = Vec::new();
        for (i, (up, why)) in now.iter().enumerate() {
            let was = self.seen.get(i).copied();
            if first || was == Some(*up) {
                continue;
            }
            let id = ids.get(i).copied().unwrap_or(i);
            let name = names.get(i).map(String::as_str).unwrap_or("?");
            out.push(match (up, why) {
                (true, _) => format!("port {id} ({name}): link up"),
                (false, Some(why)) => format!("port {id} ({name}): link down: {why}"),
                (false, None) => format!("port {id} ({name}): link down"),
            });
        }
        self.seen = now.iter().map(|s| s.0).collect();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_told_once_with_its_reason() {
        let mut w = LinkWatch::default();
        let names = vec!["a".to_string(), "b".to_string()];
        assert!(w
            .changes(&[(false, None), (true, None)], &[0, 1], &names)
            .is_empty());
        let gone = (false, Some("interface b is gone".to_string()));
        assert_eq!(
            w.changes(&[(true, None), gone.clone()], &[0, 1], &names),
            [
                "port 0 (a): link up",
                "port 1 (b): link down: interface b is gone"
            ]
        );
        assert!(w.changes(&[(true, None), gone], &[0, 1], &names).is_empty());
    }
}
