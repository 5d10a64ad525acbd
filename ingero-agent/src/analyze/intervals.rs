//! Interval arithmetic for group durations: the union of the intervals a label value held,
//! intersected across the keys of a group and clipped to the selection.

/// Sorts and merges overlapping or touching intervals.
pub fn union(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// The intersection of two sorted, disjoint lists.
pub fn intersect(x: &[(u64, u64)], y: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < x.len() && j < y.len() {
        let a = x[i].0.max(y[j].0);
        let b = x[i].1.min(y[j].1);
        if a < b {
            out.push((a, b));
        }
        if x[i].1 < y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Total length.
pub fn total(v: &[(u64, u64)]) -> u64 {
    v.iter().map(|(a, b)| b - a).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_and_intersection() {
        let u = union(vec![(5, 10), (0, 3), (2, 4), (10, 12)]);
        assert_eq!(u, vec![(0, 4), (5, 12)]);
        assert_eq!(
            intersect(&u, &[(3, 6), (11, 20)]),
            vec![(3, 4), (5, 6), (11, 12)]
        );
        assert_eq!(total(&u), 11);
    }
}
