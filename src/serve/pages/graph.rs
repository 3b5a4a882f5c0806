//! The step graph of the instance page: each step a box coloured by its
//! status, an arrow for each `needs`, laid out by the server as an SVG.
//!
//! Written here rather than taken from a crate: what is needed is a small
//! layered layout (the crates that do it, graphviz bindings or layout-rs,
//! bring a whole renderer and its styles), and it must stay readable at 200
//! steps. The layout is Sugiyama's in its plainest form: a step's layer is
//! the longest chain of `needs` before it; within a layer, steps are
//! ordered by the mean position of what they need (a few sweeps down and
//! up reduce crossings); on a wide screen a layer is a column (a wide
//! workflow scrolls sideways rather than shrinking its labels), on a narrow
//! one a row of narrower boxes ([`Direction`]), so a phone scrolls down
//! through every box. `for_each` steps show their
//! items' count, `workflow:` steps their child count. Pure: a unit test
//! checks it without a server.

use std::fmt::Write as _;

/// One step as the graph shows it.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    /// Indices of the steps it needs.
    pub needs: Vec<usize>,
    /// The status word (`completed`, `failed`, …): its CSS class.
    pub status: String,
    /// What the box says under the id (`3 items`, `child`, `2 attempts`).
    pub note: Option<String>,
    /// A group's members (a `for_each` step's items, a `workflow:` step's
    /// children): each one's status, drawn as a chip inside the box.
    pub members: Vec<String>,
}

/// Where each node goes: (layer, position in the layer).
pub fn layout(nodes: &[Node]) -> Vec<(usize, usize)> {
    let n = nodes.len();
    // Layers: the longest chain of needs before each step. `needs` point
    // backwards in a valid workflow, but a cycle is not trusted to be absent.
    let mut layer = vec![0usize; n];
    for _ in 0..n {
        let mut changed = false;
        for (i, node) in nodes.iter().enumerate() {
            let l = node
                .needs
                .iter()
                .filter(|&&d| d < n)
                .map(|&d| layer[d] + 1)
                .max()
                .unwrap_or(0)
                .min(n);
            if l != layer[i] {
                layer[i] = l;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let depth = layer.iter().copied().max().map_or(0, |m| m + 1);
    let mut columns: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (i, &l) in layer.iter().enumerate() {
        columns[l].push(i);
    }
    // Order within layers by the barycentre of neighbours, a few sweeps.
    let mut pos = vec![0f64; n];
    let place = |columns: &Vec<Vec<usize>>, pos: &mut Vec<f64>| {
        for col in columns {
            for (k, &i) in col.iter().enumerate() {
                pos[i] = k as f64;
            }
        }
    };
    place(&columns, &mut pos);
    let dependents: Vec<Vec<usize>> = {
        let mut d = vec![Vec::new(); n];
        for (i, node) in nodes.iter().enumerate() {
            for &x in node.needs.iter().filter(|&&x| x < n) {
                d[x].push(i);
            }
        }
        d
    };
    for sweep in 0..4 {
        let down = sweep % 2 == 0;
        let order: Vec<usize> = if down {
            (1..depth).collect()
        } else {
            (0..depth.saturating_sub(1)).rev().collect()
        };
        for l in order {
            let mut keyed: Vec<(f64, usize)> = columns[l]
                .iter()
                .map(|&i| {
                    let near: &[usize] = if down {
                        &nodes[i].needs
                    } else {
                        &dependents[i]
                    };
                    let near: Vec<f64> = near.iter().filter(|&&x| x < n).map(|&x| pos[x]).collect();
                    let key = if near.is_empty() {
                        pos[i]
                    } else {
                        near.iter().sum::<f64>() / near.len() as f64
                    };
                    (key, i)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            columns[l] = keyed.into_iter().map(|(_, i)| i).collect();
            place(&columns, &mut pos);
        }
    }
    let mut out = vec![(0, 0); n];
    for (l, col) in columns.iter().enumerate() {
        for (k, &i) in col.iter().enumerate() {
            out[i] = (l, k);
        }
    }
    out
}

const W: usize = 168;
const H: usize = 44;
/// The height a group adds for its chips.
const CHIPS: usize = 16;
/// The most chips a group draws (then `+N`).
const MAX_CHIPS: usize = 12;
const GAP_X: usize = 56;
const GAP_Y: usize = 14;

/// Which way the layers go: across (a layer a column, for a wide screen)
/// or down (a layer a row, for a narrow one: boxes side by side in a layer,
/// the graph as long as it needs, every box reachable by scrolling down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Across,
    Down,
}

/// The width of a box laid out down (narrower: two or three side by side
/// fit a phone's width).
const W_DOWN: usize = 140;
const GAP_DOWN_X: usize = 14;
const GAP_DOWN_Y: usize = 34;

/// The graph as an SVG element (ids and notes escaped), each box a link to
/// its row of the steps table (`#step-ID`), its layers going `dir`.
pub fn svg(nodes: &[Node], dir: Direction) -> String {
    let at = layout(nodes);
    let layers = at.iter().map(|a| a.0 + 1).max().unwrap_or(0);
    let places = at.iter().map(|a| a.1 + 1).max().unwrap_or(0);
    let tall = |i: usize| {
        if nodes[i].members.is_empty() {
            H
        } else {
            H + CHIPS
        }
    };
    // Across: a place (row) is as tall as its tallest box; down: a layer
    // (row) is. Then each box's corner, and the whole size.
    let (w, width, height, xy): (usize, usize, usize, Vec<(usize, usize)>) = match dir {
        Direction::Across => {
            let mut row_h = vec![H; places];
            for i in 0..nodes.len() {
                row_h[at[i].1] = row_h[at[i].1].max(tall(i));
            }
            let mut row_y = vec![GAP_Y; places];
            for k in 1..places {
                row_y[k] = row_y[k - 1] + row_h[k - 1] + GAP_Y;
            }
            let width = layers * (W + GAP_X) + GAP_X / 2;
            let height =
                row_y.last().copied().unwrap_or(0) + row_h.last().copied().unwrap_or(0) + GAP_Y;
            let xy = at
                .iter()
                .map(|&(l, k)| (GAP_X / 4 + l * (W + GAP_X), row_y[k]))
                .collect();
            (W, width, height, xy)
        }
        Direction::Down => {
            let mut row_h = vec![H; layers];
            for i in 0..nodes.len() {
                row_h[at[i].0] = row_h[at[i].0].max(tall(i));
            }
            let mut row_y = vec![GAP_DOWN_Y / 2; layers];
            for l in 1..layers {
                row_y[l] = row_y[l - 1] + row_h[l - 1] + GAP_DOWN_Y;
            }
            let width = places * (W_DOWN + GAP_DOWN_X) + GAP_DOWN_X;
            let height = row_y.last().copied().unwrap_or(0)
                + row_h.last().copied().unwrap_or(0)
                + GAP_DOWN_Y / 2;
            let xy = at
                .iter()
                .map(|&(l, k)| (GAP_DOWN_X + k * (W_DOWN + GAP_DOWN_X), row_y[l]))
                .collect();
            (W_DOWN, width, height, xy)
        }
    };
    let arrow = match dir {
        Direction::Across => "arrow-across",
        Direction::Down => "arrow-down",
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="graph" role="img" aria-label="step graph" viewBox="0 0 {width} {height}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">"#
    );
    let _ = write!(
        s,
        r#"<defs><marker id="{arrow}" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="edge-head"/></marker></defs>"#
    );
    for (i, node) in nodes.iter().enumerate() {
        for &d in node.needs.iter().filter(|&&d| d < nodes.len()) {
            let ((x0, y0), (x1, y1)) = (xy[d], xy[i]);
            let path = match dir {
                Direction::Across => {
                    let (ax, ay, bx, by) = (x0 + w, y0 + H / 2, x1, y1 + H / 2);
                    let mid = (ax + bx) / 2;
                    format!("M{ax},{ay} C{mid},{ay} {mid},{by} {bx},{by}")
                }
                Direction::Down => {
                    let (ax, ay, bx, by) = (x0 + w / 2, y0 + tall(d), x1 + w / 2, y1);
                    let mid = (ay + by) / 2;
                    format!("M{ax},{ay} C{ax},{mid} {bx},{mid} {bx},{by}")
                }
            };
            let _ = write!(
                s,
                r#"<path class="edge" d="{path}" marker-end="url(#{arrow})"/>"#
            );
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        let (x, y) = xy[i];
        draw_node(&mut s, node, x, y, w);
    }
    s.push_str("</svg>");
    s
}

/// One box at (`x`, `y`), `w` wide: its id (cut to fit), its status and
/// note, a group's chips; a link to its row of the steps table.
fn draw_node(s: &mut String, node: &Node, x: usize, y: usize, w: usize) {
    let id = escape(&node.id);
    // About 8 px a character of the monospace label, 20 px of padding.
    let fits = (w - 20) / 8;
    let shown: String = if node.id.chars().count() > fits {
        node.id.chars().take(fits - 1).collect::<String>() + "…"
    } else {
        node.id.clone()
    };
    let h = if node.members.is_empty() {
        H
    } else {
        H + CHIPS
    };
    let _ = write!(
        s,
        r##"<a href="#step-{id}"><g class="node s-{status}{group}"><title>{id}: {status}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6"/><text x="{tx}" y="{ty}">{label}</text>"##,
        status = escape(&node.status),
        group = if node.members.is_empty() {
            ""
        } else {
            " group"
        },
        tx = x + 10,
        ty = y + 18,
        label = escape(&shown),
    );
    let chips = ((w - 20) / 12).min(MAX_CHIPS);
    for (k, m) in node.members.iter().take(chips).enumerate() {
        let _ = write!(
            s,
            r#"<rect class="chip s-{}" x="{}" y="{}" width="9" height="9" rx="2"/>"#,
            escape(m),
            x + 10 + k * 12,
            y + H - 2
        );
    }
    if node.members.len() > chips {
        let _ = write!(
            s,
            r#"<text class="note" x="{}" y="{}">+{}</text>"#,
            x + 10 + chips * 12,
            y + H + 7,
            node.members.len() - chips
        );
    }
    let note = match &node.note {
        Some(n) => format!("{} · {n}", node.status),
        None => node.status.clone(),
    };
    let _ = write!(
        s,
        r#"<text class="note" x="{}" y="{}">{}</text></g></a>"#,
        x + 10,
        y + 35,
        escape(&note)
    );
}

/// Text for HTML or SVG, its markup characters escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, needs: &[usize]) -> Node {
        Node {
            id: id.into(),
            needs: needs.to_vec(),
            status: "completed".into(),
            note: None,
            members: Vec::new(),
        }
    }

    #[test]
    fn a_group_draws_a_chip_per_member_up_to_a_dozen() {
        let mut g = node("fan", &[]);
        g.members = vec!["completed".into(); 15];
        g.members[3] = "failed".into();
        let s = svg(&[g], Direction::Across);
        assert_eq!(s.matches("class=\"chip ").count(), 12);
        assert!(s.contains("chip s-failed"));
        assert!(s.contains(">+3<"));
    }

    #[test]
    fn a_step_is_one_layer_after_the_longest_chain_it_needs() {
        // a -> b -> d, a -> c -> d, e alone.
        let nodes = [
            node("a", &[]),
            node("b", &[0]),
            node("c", &[0]),
            node("d", &[1, 2]),
            node("e", &[]),
        ];
        let at = layout(&nodes);
        assert_eq!(at[0].0, 0);
        assert_eq!(at[1].0, 1);
        assert_eq!(at[2].0, 1);
        assert_eq!(at[3].0, 2);
        assert_eq!(at[4].0, 0);
        // No two nodes share a place.
        let mut seen = std::collections::HashSet::new();
        assert!(at.iter().all(|p| seen.insert(*p)));
    }

    #[test]
    fn crossings_are_undone_by_the_sweeps() {
        // Two chains written interleaved: x0 -> y1, x1 -> y0.
        let nodes = [
            node("x0", &[]),
            node("x1", &[]),
            node("y0", &[1]),
            node("y1", &[0]),
        ];
        let at = layout(&nodes);
        // y1 (needs x0) sits beside x0, y0 beside x1.
        assert_eq!(at[3].1 < at[2].1, at[0].1 < at[1].1);
    }

    #[test]
    fn two_hundred_steps_and_a_cycle_are_laid_out() {
        let nodes: Vec<Node> = (0..200)
            .map(|i| node(&format!("s{i}"), if i == 0 { &[] } else { &[0] }))
            .collect();
        let at = layout(&nodes);
        assert_eq!(at.iter().filter(|p| p.0 == 1).count(), 199);
        // A cycle (never valid, but never a hang).
        let cyc = [node("a", &[1]), node("b", &[0])];
        assert_eq!(layout(&cyc).len(), 2);
    }

    #[test]
    fn the_svg_escapes_what_it_shows() {
        let mut n = node("<b>&\"", &[]);
        n.note = Some("<i>".into());
        let s = svg(&[n], Direction::Across);
        assert!(!s.contains("<b>") && !s.contains("<i>"), "{s}");
        assert!(s.contains("&lt;b&gt;&amp;&quot;"), "{s}");
    }

    #[test]
    fn laid_out_down_a_layer_is_a_row_and_arrows_point_down() {
        let nodes = [
            node("a", &[]),
            node("b", &[0]),
            node("c", &[0]),
            node("d", &[1, 2]),
        ];
        let s = svg(&nodes, Direction::Down);
        // Three layers of at most two boxes: two boxes wide, three rows tall.
        let width = 2 * (W_DOWN + GAP_DOWN_X) + GAP_DOWN_X;
        assert!(s.contains(&format!("width=\"{width}\"")), "{s}");
        assert!(width <= 340, "fits a 360 px screen: {width}");
        let ys: Vec<usize> = s
            .match_indices("<rect x=\"")
            .map(|(at, _)| {
                let rest = &s[at..];
                let y = rest.split("y=\"").nth(1).unwrap();
                y[..y.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(ys.len(), 4);
        assert!(ys[0] < ys[1] && ys[1] == ys[2] && ys[2] < ys[3], "{ys:?}");
        assert!(s.contains("url(#arrow-down)") && !s.contains("arrow-across"));
    }
}
