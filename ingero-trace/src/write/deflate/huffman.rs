//! Length-limited Huffman codes for DEFLATE (RFC 1951 §3.2.2): optimal code lengths under a
//! maximum length by package-merge, and the canonical codes those lengths define.

/// One item of package-merge: a leaf (a symbol) or a package of two earlier items.
#[derive(Clone, Copy)]
enum Item {
    Leaf(u16),
    Package(u32, u32),
}

/// Reusable working memory for [`Lengths::build`].
#[derive(Default)]
pub struct Lengths {
    leaves: Vec<(u32, u16)>,
    weights: Vec<u64>,
    parent: Vec<u32>,
    depth: Vec<u8>,
    arena: Vec<(u64, Item)>,
    list: Vec<u32>,
    next: Vec<u32>,
    packaged: Vec<u32>,
    stack: Vec<u32>,
}

impl Lengths {
    /// Writes into `lens` the code length of each symbol of `freqs` (0 for an unused one):
    /// optimal among prefix codes whose lengths are at most `max_len`, and complete (as
    /// DEFLATE decoders require) as long as two or more symbols are used. With one used symbol
    /// its length is 1.
    pub fn build(&mut self, freqs: &[u32], max_len: u8, lens: &mut [u8]) {
        debug_assert_eq!(freqs.len(), lens.len());
        lens.fill(0);
        self.leaves.clear();
        self.leaves.extend(
            freqs
                .iter()
                .enumerate()
                .filter(|(_, f)| **f > 0)
                .map(|(s, f)| (*f, s as u16)),
        );
        match self.leaves.as_slice() {
            [] => return,
            [(_, s)] => {
                lens[usize::from(*s)] = 1;
                return;
            }
            _ => {}
        }
        debug_assert!(
            self.leaves.len() <= 1 << max_len,
            "too many symbols for {max_len} bits"
        );
        self.leaves.sort_unstable();
        // A plain Huffman code first (linear once sorted); package-merge only when it is
        // deeper than allowed, which skewed counts rarely make it.
        if self.huffman(lens) <= max_len {
            return;
        }
        lens.fill(0);
        self.arena.clear();
        self.arena.extend(
            self.leaves
                .iter()
                .map(|(f, s)| (u64::from(*f), Item::Leaf(*s))),
        );
        let n = self.leaves.len() as u32;
        // Level `max_len`: the leaves alone; each level up merges the leaves with the
        // packages (adjacent pairs) of the level below.
        self.list.clear();
        self.list.extend(0..n);
        for _ in 1..max_len {
            self.packaged.clear();
            for pair in self.list.chunks_exact(2) {
                let w = self.arena[pair[0] as usize].0 + self.arena[pair[1] as usize].0;
                self.packaged.push(self.arena.len() as u32);
                self.arena.push((w, Item::Package(pair[0], pair[1])));
            }
            self.next.clear();
            let (mut i, mut j) = (0usize, 0usize);
            while i < n as usize || j < self.packaged.len() {
                let take_leaf = match (i < n as usize, self.packaged.get(j)) {
                    (true, Some(p)) => self.arena[i].0 <= self.arena[*p as usize].0,
                    (true, None) => true,
                    (false, _) => false,
                };
                if take_leaf {
                    self.next.push(i as u32);
                    i += 1;
                } else {
                    self.next.push(self.packaged[j]);
                    j += 1;
                }
            }
            std::mem::swap(&mut self.list, &mut self.next);
        }
        // Each leaf's length is how often it occurs in the first 2n − 2 items.
        let take = (2 * n - 2) as usize;
        self.stack.clear();
        self.stack.extend(self.list.iter().take(take).copied());
        while let Some(at) = self.stack.pop() {
            match self.arena[at as usize].1 {
                Item::Leaf(s) => lens[usize::from(s)] += 1,
                Item::Package(a, b) => {
                    self.stack.push(a);
                    self.stack.push(b);
                }
            }
        }
    }
}

impl Lengths {
    /// Huffman code lengths of the sorted `leaves` into `lens` (two queues: leaves, and the
    /// internal nodes, which are made in increasing weight); returns the longest.
    fn huffman(&mut self, lens: &mut [u8]) -> u8 {
        let n = self.leaves.len();
        self.weights.clear();
        self.weights
            .extend(self.leaves.iter().map(|(f, _)| u64::from(*f)));
        self.parent.clear();
        self.parent.resize(2 * n - 1, 0);
        let (mut leaf, mut inner) = (0usize, n);
        for node in n..2 * n - 1 {
            let mut pick = || {
                let take_leaf =
                    leaf < n && (inner >= node || self.weights[leaf] <= self.weights[inner]);
                if take_leaf {
                    leaf += 1;
                    leaf - 1
                } else {
                    inner += 1;
                    inner - 1
                }
            };
            let (a, b) = (pick(), pick());
            self.weights.push(self.weights[a] + self.weights[b]);
            self.parent[a] = node as u32;
            self.parent[b] = node as u32;
        }
        self.depth.clear();
        self.depth.resize(2 * n - 1, 0);
        let mut max = 0;
        for node in (0..2 * n - 2).rev() {
            let d = self.depth[self.parent[node] as usize].saturating_add(1);
            self.depth[node] = d;
            max = max.max(d);
        }
        for (i, (_, s)) in self.leaves.iter().enumerate() {
            lens[usize::from(*s)] = self.depth[i];
        }
        max
    }
}

/// The canonical codes of `lens` (RFC 1951 §3.2.2), bit-reversed for writing least
/// significant bit first, into `codes`.
pub fn canonical(lens: &[u8], codes: &mut [u16]) {
    let mut count = [0u16; 16];
    for l in lens {
        count[usize::from(*l)] += 1;
    }
    count[0] = 0;
    let mut next = [0u16; 16];
    let mut code = 0u16;
    for bits in 1..16 {
        code = (code + count[bits - 1]) << 1;
        next[bits] = code;
    }
    for (l, c) in lens.iter().zip(codes.iter_mut()) {
        let l = usize::from(*l);
        if l == 0 {
            *c = 0;
            continue;
        }
        *c = next[l].reverse_bits() >> (16 - l);
        next[l] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Σ 2^(max − len) over used symbols, against 2^max: equal means a complete code.
    fn kraft(lens: &[u8], max: u8) -> (u64, u64) {
        let sum = lens
            .iter()
            .filter(|l| **l > 0)
            .map(|l| 1u64 << (max - l))
            .sum();
        (sum, 1 << max)
    }

    #[test]
    fn codes_are_complete_and_within_the_limit() {
        let mut b = Lengths::default();
        // Fibonacci weights make the deepest unlimited Huffman trees.
        let mut fib = vec![1u32, 1];
        while fib.len() < 30 {
            let k = fib.len();
            fib.push(fib[k - 1] + fib[k - 2]);
        }
        let cases: Vec<(Vec<u32>, u8)> = vec![
            (fib.clone(), 15),
            (fib.clone(), 7),
            (vec![5, 0, 0, 9], 15),
            (vec![1; 286], 15),
            (vec![1; 19], 7),
            ((1..=200).map(|i| i * i).collect(), 15),
        ];
        for (freqs, max) in cases {
            let mut lens = vec![0u8; freqs.len()];
            b.build(&freqs, max, &mut lens);
            assert!(lens.iter().all(|l| *l <= max), "{lens:?}");
            for (f, l) in freqs.iter().zip(&lens) {
                assert_eq!(*f > 0, *l > 0, "used symbols and only they get a code");
            }
            let (sum, full) = kraft(&lens, max);
            assert_eq!(sum, full, "complete: {lens:?}");
        }
        let mut lens = [0u8; 3];
        b.build(&[0, 7, 0], 15, &mut lens);
        assert_eq!(lens, [0, 1, 0]);
    }

    #[test]
    fn lengths_are_optimal_when_the_limit_does_not_bind() {
        // Huffman on 1,1,2,3,5: lengths 4,4,3,2,1 (cost 1·4+1·4+2·3+3·2+5·1 = 25).
        let mut lens = [0u8; 5];
        Lengths::default().build(&[1, 1, 2, 3, 5], 15, &mut lens);
        let cost: u32 = [1u32, 1, 2, 3, 5]
            .iter()
            .zip(&lens)
            .map(|(f, l)| f * u32::from(*l))
            .sum();
        assert_eq!(cost, 25, "{lens:?}");
    }

    #[test]
    fn canonical_codes_follow_the_rfc_example() {
        // RFC 1951 §3.2.2: lengths (3, 3, 3, 3, 3, 2, 4, 4) give
        // 010, 011, 100, 101, 110, 00, 1110, 1111.
        let lens = [3u8, 3, 3, 3, 3, 2, 4, 4];
        let mut codes = [0u16; 8];
        canonical(&lens, &mut codes);
        let want = [0b010u16, 0b011, 0b100, 0b101, 0b110, 0b00, 0b1110, 0b1111];
        for ((c, l), w) in codes.iter().zip(&lens).zip(want) {
            assert_eq!(c.reverse_bits() >> (16 - l), w);
        }
    }
}
